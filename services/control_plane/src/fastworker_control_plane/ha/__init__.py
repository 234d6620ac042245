"""Replicated control planes (issue 20): one leads, the others follow its journal.

- ``addresses``: what a candidate publishes with its campaign, and the ``Announce`` a
  follower makes of its leader's term (so discovery on any replica finds the leader);
- ``leader``: the leader's side of replication: ships its journal to followers, and
  holds each acknowledgement until enough followers have it (``Gate``);
- ``follower``: a follower's link to the leader: receives the journal into its state dir;
- ``node``: the process: campaigns, follows, leads, steps down, and back.

The election itself is ``election``; the stream's rules are ``replication``.
"""
