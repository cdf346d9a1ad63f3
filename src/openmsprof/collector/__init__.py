"""``openmsprof collect``: profile a program with no code change, here or on a board over SSH.

- :mod:`.options`   — the collect switches → :class:`ProfileConfig`, acl.json, child environment
- :mod:`.program`   — turn ``-m PROGRAM ARGS`` into an argv
- :mod:`.local`     — run the program here, forward signals, find the new job directories
- :mod:`.autostart` — the child-side session start used by ``openmsprof/_bootstrap/sitecustomize.py``
- :mod:`.board`     — the ``board.ini`` loader (permission check, no secret in any message)
- :mod:`.ssh`       — SSH connection: host-key verification, key/password auth, clear errors
- :mod:`.sftpcopy`  — upload a program/project, bring job directories back (recursive SFTP)
- :mod:`.remote`    — the remote run: upload, run with streamed output, copy back
- :mod:`.postprocess` — ``--all``: import and export the collected jobs
"""
