"""The one persistence layer: every byte the daemon keeps goes through here.

- `files`: atomic replacement (a crash leaves the old file or the new one) and `AppendFile`,
  whose appends are whole or absent.
- `dirs`: the state dir is ours and private (0700), pinned at start and checked again before
  every write into it (`recheck_dir`).
- `journal`: typed append-only journals. Records are msgspec tagged unions (their `op` is the
  tag), read back line by line; a torn or foreign line is skipped and its file quarantined.
- `document`: typed documents (snapshots) replaced atomically; one that does not decode is
  quarantined and its previous version, if kept, read instead.
- `quarantine`: the one place a corrupt file is set aside; what it holds is what `status` and
  `doctor` show.
- `health`: whether the state dir takes the daemon's writes, said where a user looks.
- `state`, `parts`, `replay`: the daemon state's schema and its journal records, the snapshot
  fields journaled as changed leaves, and the journal replayed onto the snapshot at start.
"""
