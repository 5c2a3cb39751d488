"""SONiC: intent -> config_db tables (render.py), the change as an RFC 6902 patch for `config apply-patch`
(patch.py), and SSH sessions that apply it under a switch-side revert timer (session.py)."""
