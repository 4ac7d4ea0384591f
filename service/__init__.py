"""What a partition does with its state: the step functions every driver
calls (`steps`), query-time retrieval (`retrieval`), the scheduler of ticks,
the writing of snapshots, and the lexicons and the encoder retrieval reads
(WordNet, CC-CEDICT, the Chinese lexicon, word vectors).

It sits between `state/` (storage and the fold) and the drivers (`replay/`,
`streams/`): it reads and folds state through `state/`, and reads files and
the environment for its lexicons and caches, which `state/` never does.
"""
