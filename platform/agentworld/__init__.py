"""AgentWorld: train and serve language world models on Ray."""
