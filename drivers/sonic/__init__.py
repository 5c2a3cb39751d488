"""SONiC: intent -> config_db tables (render.py), and the change as an RFC 6902 patch for `config apply-patch`
(patch.py)."""
