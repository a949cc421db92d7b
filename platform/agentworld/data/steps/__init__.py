"""The steps of the prepare run, one file each, in the order agentworld.data.run.STEPS
runs them; each returns a typed result (steps/base.py holds the contract):

  ingest     read + validate + features           -> _work/ingest/ (every input line once)
  dedup      exact + near-dup clusters            -> _work/labels.parquet
  count      per-domain/source/input states, eval split threshold
  audit      quarantine/ contaminated/ duplicates/
  tokenizer  tokenizer/ (trained on kept training text, or the pretrained one;
             steps/train_tokenizer.py)
  tokenize   CPT documents + SFT samples          -> _work/samples/
  pack       packed/{cpt,sft}/{train,eval}/part-XXXXX.parquet (written shards are kept)
  samples    samples/sft/part-XXXXX.parquet

Nothing is imported here: the step modules load Arrow and numpy.
"""
