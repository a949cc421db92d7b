"""CPT and SFT on Ray Train with DeepSpeed (ZeRO, expert parallelism via AutoEP).

Light to import. The driver is ``agentworld.train.run.run(TrainJob(...))``;
each worker runs ``agentworld.train.worker.train_loop_per_worker``. Layout:
``batch`` (packed rows -> tensors), ``loss`` (objective, schedule), ``ds_config``,
``engine`` (model + DeepSpeed), ``checkpoint``, ``export`` (HF), ``worker`` (the loop),
``placement`` (all the Ray code: trainer, datasets, resources, the report queue, the
worker's Ray Train calls), ``progress`` (driver progress), ``job`` (the run and its
pre-flight checks), ``run`` (the driver).
"""
