"""The `emgas` command line (`main`), built from command descriptions (`command`)."""
