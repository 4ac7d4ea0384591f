FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
# The one installed package, `emgas`, maps these folders (pyproject.toml's package-dir).
COPY emgas ./emgas
COPY processors ./processors
COPY state ./state
COPY service ./service
COPY streams ./streams
COPY replay ./replay
RUN pip install --no-cache-dir .
# The fold's compiled loops (state/kernels.py), compiled once into the image's numba cache, not at each start.
RUN python -c "from emgas.state import kernels; kernels.warm()"
RUN useradd --create-home emgas && mkdir -p /var/lib/emgas && chown emgas /var/lib/emgas
USER emgas
CMD ["emgas", "worker"]
