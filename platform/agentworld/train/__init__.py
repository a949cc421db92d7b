"""CPT and SFT on Ray Train with DeepSpeed (ZeRO, expert parallelism via AutoEP).

Light to import. The driver is ``agentworld.train.stage.run_stage(TrainJob(...))``;
each worker runs ``agentworld.train.worker.train_loop_per_worker``. Layout:
``batch`` (packed rows -> tensors), ``loss`` (objective, schedule), ``ds_config``,
``engine`` (model + DeepSpeed), ``checkpoint``, ``export`` (HF), ``worker`` (the loop),
``placement`` (Ray: trainer, datasets, resources), ``progress`` (driver progress, wandb),
``job`` (the run and its pre-flight checks), ``cli`` (jobs/cpt.py, jobs/sft.py).
"""
