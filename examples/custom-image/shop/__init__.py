"""An example package of tasks, installed into a subworker image (see ../Dockerfile)."""
