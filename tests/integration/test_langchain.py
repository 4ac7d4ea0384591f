"""The LangChain retriever and the LangGraph store (`streams.interfaces.langchain`) against a live worker."""

from __future__ import annotations

from datetime import datetime

import pytest
from langchain_core.documents import Document
from langgraph.store.base import InvalidNamespaceError, Item, SearchItem

from emgas.streams.interfaces.langchain import EmgasRetriever, EmgasStore, graph_of
from emgas.streams.interfaces.memory import Memory

pytestmark = pytest.mark.integration

DOG = "I adopted a greyhound called Pretzel last week"
BEACH = "Pretzel loves running on the beach at Cromer"
WORK = "The quarterly report for the Lisbon office is due on Friday"
WIND = "The beach at Cromer was windy and cold today"
METADATA = {"graph", "turn_id", "speaker", "timestamp", "score", "concepts"}


@pytest.fixture(scope="module")
def remembered(pipeline):
    """Graph `lc-retriever` holding four turns: text -> turn id."""
    with Memory(graph="lc-retriever", settings=pipeline) as memory:
        return {text: memory.add(text)[0] for text in (DOG, BEACH, WORK, WIND)}


def check_documents(docs: list[Document], remembered: dict[str, str]) -> None:
    """The greyhound passage first, every document with the metadata the retriever promises."""
    assert docs and all(isinstance(d, Document) for d in docs)
    first = docs[0]
    assert first.page_content == DOG and first.id == remembered[DOG]
    assert set(first.metadata) == METADATA
    assert first.metadata["turn_id"] == remembered[DOG] and first.metadata["speaker"] == "user"
    assert datetime.fromisoformat(first.metadata["timestamp"]).tzinfo is not None
    assert first.metadata["score"] > 0 and first.metadata["score"] >= docs[-1].metadata["score"]
    assert "greyhound" in [c.lower() for c in first.metadata["concepts"]]


def test_retriever_invoke(pipeline, remembered):
    retriever = EmgasRetriever(graph="lc-retriever", k=3, settings=pipeline, reinforce=False)
    try:
        docs = retriever.invoke("greyhound Pretzel")
        print("\nretriever.invoke:", *(f"  {d.metadata['score']:.3f} {d.page_content!r} {d.metadata}" for d in docs),
              sep="\n")
        check_documents(docs, remembered)
        assert len(docs) == 3 and len(retriever.invoke("greyhound Pretzel", k=1)) == 1
        nobody = EmgasRetriever(graph="lc-nobody", settings=pipeline)
        assert nobody.invoke("greyhound") == []  # a graph with no turns yet
        nobody.close()
    finally:
        retriever.close()


async def test_retriever_ainvoke(pipeline, remembered):
    retriever = EmgasRetriever(graph="lc-retriever", k=2, settings=pipeline, reinforce=False)
    try:
        docs = await retriever.ainvoke("greyhound Pretzel")
        check_documents(docs, remembered)
        assert len(docs) == 2
        assert (await retriever.abatch(["greyhound", "Lisbon report"]))[1][0].page_content == WORK
    finally:
        await retriever.aclose()


try:
    from langchain_tests.integration_tests import RetrieversIntegrationTests
except ImportError:  # langchain-tests is not part of the test extra: the checks above do the same by hand
    RetrieversIntegrationTests = None

if RetrieversIntegrationTests is not None:

    MADE: list[EmgasRetriever] = []

    class _Closed(EmgasRetriever):
        """An EmgasRetriever the suite's teardown closes (the suite makes them)."""

        def model_post_init(self, context: object) -> None:
            super().model_post_init(context)
            MADE.append(self)

    class TestStandardRetriever(RetrieversIntegrationTests):
        """LangChain's standard retriever tests (langchain-tests)."""

        @pytest.fixture(autouse=True)
        def _live(self, pipeline, remembered):
            self.settings = pipeline
            yield
            while MADE:
                MADE.pop().close()

        @property
        def retriever_constructor(self) -> type[EmgasRetriever]:
            return _Closed

        @property
        def retriever_constructor_params(self) -> dict:
            return {"graph": "lc-retriever", "settings": self.settings, "reinforce": False}

        @property
        def retriever_query_example(self) -> str:
            return "greyhound Pretzel"

else:

    def test_standard_retriever_suite():
        pytest.skip("langchain-tests is not installed: LangChain's standard retriever tests did not run")


def test_store_put_get_search_update_delete(pipeline):
    alice = ("lc-users", "alice")
    with EmgasStore(pipeline, reinforce=False) as store:
        store.put(alice, "dog", {"text": DOG})
        store.put(alice, "work", {"content": WORK, "speaker": "assistant"})
        store.put(alice, "beach", {"text": BEACH})

        item = store.get(alice, "work")
        print(f"\nstore.get: {item}")
        assert isinstance(item, Item) and item.key == "work" and item.namespace == alice
        assert item.value["text"] == WORK and item.value["speaker"] == "assistant" and "report" in item.value["concepts"]
        assert item.created_at == item.updated_at == datetime.fromisoformat(item.value["timestamp"])
        assert store.get(alice, "nothing") is None

        found = store.search(alice, query="greyhound Pretzel", limit=2)
        print("store.search:", *(f"  {r.score:.3f} {r.key} {r.value['text']!r}" for r in found), sep="\n")
        assert [r.key for r in found] == ["dog", "beach"] and all(isinstance(r, SearchItem) for r in found)
        assert found[0].score > found[1].score > 0 and found[0].value["text"] == DOG

        store.put(alice, "dog", {"text": "I adopted a whippet called Noodle last week"})
        updated = store.get(alice, "dog")
        print(f"after the update: {updated}")
        assert updated is not None and "whippet" in updated.value["text"]
        assert [r.key for r in store.search(alice, query="whippet Noodle", limit=1)] == ["dog"]
        # The old revision is gone; the new one may still be found for "greyhound":
        # WordNet relates it to the whippet (both hounds), as it should.
        assert DOG not in [r.value["text"] for r in store.search(alice, query="greyhound", limit=3)]

        store.delete(alice, "dog")
        assert store.get(alice, "dog") is None
        store.put(alice, "dog", {"text": "A dachshund called Biscuit"})  # a key deleted and put again
        assert store.get(alice, "dog").value["text"] == "A dachshund called Biscuit"

    with Memory(graph="lc-users/alice", settings=pipeline) as memory:  # the namespace is that graph
        [work] = memory.passages(prefix="work#r")  # the key's revision
        assert work.text == WORK


async def test_store_async_and_namespaces(pipeline):
    bob = ("lc-users", "bob")
    async with EmgasStore(pipeline) as store:
        await store.aput(bob, "tea", {"text": "Bob drinks oolong tea every morning", "speaker": "bob"})
        await store.aput(bob, "tea", {"text": "Bob drinks oolong tea every morning", "speaker": "bob"})  # unchanged
        assert (await store.aget(bob, "tea")).value["speaker"] == "bob"
        [hit] = await store.asearch(bob, query="oolong", limit=5)
        assert (hit.key, hit.namespace) == ("tea", bob) and hit.score > 0
        listed = await store.alist_namespaces(prefix=("lc-users",))
        assert bob in listed and all(ns[0] == "lc-users" and ".keys" not in ns for ns in listed)
        assert await store.alist_namespaces(prefix=("lc-users",), max_depth=1) == [("lc-users",)]
        assert await store.alist_namespaces(suffix=("*", "bob")) == [bob]

        await store.adelete(bob, "tea")
        assert await store.aget(bob, "tea") is None
        assert bob not in await store.alist_namespaces()  # no items left: the graph is gone
        assert await store.asearch(("lc-users", "nobody"), query="tea") == []

        with pytest.raises(NotImplementedError, match="needs a query"):
            await store.asearch(bob)


def test_namespaces_and_keys_are_checked(pipeline):
    assert graph_of(("users", "alice")) == "users/alice"
    with EmgasStore(pipeline) as store:
        for namespace in [(), ("users", "a/b"), ("users", ""), ("users", "a.b")]:
            with pytest.raises(InvalidNamespaceError):
                store.put(namespace, "k", {"text": "x"})
        with pytest.raises(ValueError, match="ends like a revision"):
            store.put(("lc-users", "carol"), "note#r" + "1" * 20, {"text": "x"})
        with pytest.raises(NotImplementedError, match="TTL"):
            store.put(("lc-users", "carol"), "note", {"text": "x"}, ttl=5)
