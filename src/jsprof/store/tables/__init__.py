"""The field store's tables: raw uploads compacted into Parquet parts that queries scan
without re-parsing JSON. One module per job:

- `manifest.py`: what is committed (cursor, part files, per-release sizes), read once by a
  query, replaced atomically by a writer;
- `parts.py`: the Parquet schemas, writing and checking one part file;
- `idfilter.py`: an uploads part's Bloom filter of its ids (in its footer), for lookups;
- `intern.py`: one upload -> its release's frame and stack ids and its rows (the time rule);
- `compact.py`: the compactor's run (raw uploads since the cursor -> parts -> manifest);
- `merge.py`: small parts merged by levels, closed days into one, old files after a grace;
- `prune.py`: a retention cut applied to the tables (`store/retention.py` runs it);
- `view.py`: what a query reads (manifest, uncompacted tail in memory, parts to scan);
- `rollup.py`: the rollup tables' rows (per release, day, route and env), summed on merge;
- `timeroll.py`: the merged Time view's rollups (sums per time bucket of fixed grids);
- `rebuild.py`: rollups made anew from the per-upload tables (a prune's cut day, upgrades).

Writers (compact, merge, prune) hold the tables' lock (`store/lock.py`); readers take none.
Layout under `<store>/tables/` (documented in docs/store.md):

    _manifest.json                 what is committed: cursor, part files, per-release sizes
    _compact.lock                  flock: one writer of the tables at a time
    uploads/K/D/part-NNNNNN.parquet                 one row per upload
    frames/rkey=K/part-NNNNNN.parquet               a release's frames, interned
    stacks/rkey=K/part-NNNNNN.parquet               a release's stacks (parent-pointer tree)
    weights/rkey=K/D/part-NNNNNN.parquet            per upload: (stack, marker, samples, ns)
    upload_frames/rkey=K/D/part-NNNNNN.parquet      per upload: frames present, self time
    samples/rkey=K/D/part-NNNNNN.parquet            per sample: time, stack, marker, ns
    rollup_*/rkey=K/D/part-NNNNNN.parquet           per route and env: sums (rollup.py)

K is a short hash of (app, release), D the UTC day of receivedAt. The manifest lists each
part with its receivedAt range, rows, size and CRC-32: a query skips parts outside its time
range, prune drops whole parts, and a damaged part is one clear error, never wrong data.
(Only `rkey=` is a hive-style folder name: the uploads table has an `rkey` column, and a
second partition key would make engines add or refuse columns.)
Part files are immutable once listed in the manifest; the manifest is replaced atomically
after its parts are fsync'd, so a reader that reads the manifest once sees one consistent
snapshot, and a writer killed at any instant leaves only unlisted files that the next run
overwrites (or a merge's sweep removes).
"""
