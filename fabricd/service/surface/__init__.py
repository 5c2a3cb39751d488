"""What people and machines see of the service: the REST API, the page, /metrics, who may do what, and the
narrow interface of the service they see (surface.py)."""
