// SQLite-specific behaviour: persistence across reopen, refusing foreign or newer files,
// exclusive ownership, group commit, per-op rejection inside a batch, background compaction,
// watch history read from the log, and what happens after close.
import * as fs from "node:fs"
import * as path from "node:path"
import Database from "better-sqlite3"
import { describe, expect, it } from "@effect/vitest"
import { Chunk, Effect, Either, Exit, Scope, Stream } from "effect"
import type { Store } from "@koder/fleet-core"
import { SqliteStore } from "../src/index.js"
import { tempDir } from "./storeFiles.js"

/** Open a store in its own scope, run `f`, close it. */
const withStore = <A, E>(config: SqliteStore.Config, f: (store: SqliteStore.SqliteStoreService) => Effect.Effect<A, E>) =>
  Effect.scoped(Effect.flatMap(SqliteStore.make(config), f))

/** Poll `check` until it holds, failing after `millis`. */
const eventually = <E>(check: Effect.Effect<boolean, E>, millis = 10_000) =>
  Effect.gen(function* () {
    const deadline = Date.now() + millis
    while (!(yield* check)) {
      if (Date.now() > deadline) return yield* Effect.dieMessage(`condition not met within ${millis} ms`)
      yield* Effect.sleep("5 millis")
    }
  })

/** "ok", or the tag of the failure. */
const tag = <A, E extends { readonly _tag: string }>(effect: Effect.Effect<A, E>) =>
  Effect.map(Effect.either(effect), (r) => (Either.isLeft(r) ? r.left._tag : "ok"))

const failure = <A, E>(effect: Effect.Effect<A, E>) => Effect.map(Effect.either(effect), Either.getLeft)

describe("SqliteStore", () => {
  it.scopedLive("keeps every key and the revision across a reopen", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "store.db")
      yield* withStore({ filename }, (store) =>
        Effect.gen(function* () {
          for (let i = 0; i < 50; i++) yield* store.create(`/k/${i}`, `v${i}`)
          yield* store.update("/k/3", "v3b", 4)
          yield* store.delete("/k/7")
          yield* store.txn([
            { op: "create", key: "/t/a", value: "a" },
            { op: "create", key: "/t/b", value: "b" }
          ])
          // The newest row is a tombstone; compacting to it deletes that row, and the revision must survive.
          yield* store.delete("/k/9")
          yield* store.compact(yield* store.currentRevision)
        })
      )
      yield* withStore({ filename }, (store) =>
        Effect.gen(function* () {
          expect(yield* store.currentRevision).toBe(55)
          expect(yield* store.compactRevision).toBe(55)
          expect(yield* store.get("/k/3")).toEqual({ key: "/k/3", value: "v3b", createRevision: 4, modRevision: 51, version: 2 })
          expect(yield* failure(store.get("/k/7"))).toMatchObject({ value: { _tag: "NotFound" } })
          expect(yield* store.count("/k/")).toBe(48)
          expect((yield* store.list("/t/")).items.map((kv) => kv.value)).toEqual(["a", "b"])
          // Writing continues densely from where the file left off.
          expect((yield* store.create("/k/new", "x")).modRevision).toBe(56)
        })
      )
    }))

  it.scopedLive("refuses a file that is not SQLite, another program's database, and a newer schema", () =>
    Effect.gen(function* () {
      const dir = yield* tempDir
      const text = path.join(dir, "notes.txt")
      fs.writeFileSync(text, "hello, this is not a database at all\n")
      const e1 = yield* Effect.flip(SqliteStore.make({ filename: text }))
      expect(e1._tag).toBe("ForeignFile")
      expect(e1.message).toContain(text)
      expect(e1.message).toContain("not a SQLite database")

      const other = path.join(dir, "other.db")
      const odb = new Database(other)
      odb.exec("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('ada')")
      odb.close()
      const e2 = yield* Effect.flip(SqliteStore.make({ filename: other }))
      expect(e2._tag).toBe("ForeignFile")
      expect(e2.message).toContain(other)
      expect(e2.message).toContain("users")
      // Refusing did not touch the other program's data.
      const check = new Database(other)
      expect(check.prepare("SELECT name FROM users").pluck().all()).toEqual(["ada"])
      check.close()

      const newer = path.join(dir, "newer.db")
      yield* withStore({ filename: newer }, (store) => store.create("k", "v"))
      const ndb = new Database(newer)
      ndb.prepare("UPDATE meta SET value = 99 WHERE name = 'schema_version'").run()
      ndb.close()
      const e3 = yield* Effect.flip(SqliteStore.make({ filename: newer }))
      expect(e3).toMatchObject({ _tag: "SchemaTooNew", filename: newer, fileVersion: 99, supportedVersion: 1 })
      expect(e3.message).toContain(newer)
      expect(e3.message).toMatch(/version 99.*up to version 1/)
    }))

  it.scopedLive("lets one store own a file at a time", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "store.db")
      yield* withStore({ filename }, () =>
        Effect.gen(function* () {
          const e = yield* Effect.flip(SqliteStore.make({ filename }).pipe(Effect.scoped))
          expect(e._tag).toBe("FileLocked")
          expect(e.message).toContain(filename)
        })
      )
      // Released on close: it opens again.
      yield* withStore({ filename }, (store) => store.currentRevision)
    }))

  it.scopedLive("group-commits concurrent writes into few transactions", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "store.db")
      yield* withStore({ filename }, (store) =>
        Effect.gen(function* () {
          const before = yield* store.stats
          const created = yield* Effect.all(
            Array.from({ length: 200 }, (_, i) => store.create(`/gc/${i}`, `v${i}`)),
            { concurrency: "unbounded" }
          )
          const after = yield* store.stats
          expect(after.committed - before.committed).toBe(200)
          expect(after.commits - before.commits).toBeLessThanOrEqual(10)
          // Dense revisions 1..200, each handed out once.
          expect(created.map((kv) => kv.modRevision).sort((a, b) => a - b)).toEqual(Array.from({ length: 200 }, (_, i) => i + 1))
        })
      )
    }))

  it.scopedLive("rejects a failing mutation alone, without a revision, and commits the rest of its batch", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "store.db")
      yield* withStore({ filename }, (store) =>
        Effect.gen(function* () {
          yield* store.create("/b/x", "x0") // revision 1
          const before = yield* store.stats
          const tags = yield* Effect.all(
            [
              tag(store.create("/b/a", "a")),
              tag(store.update("/b/x", "stale", 99)),
              tag(
                store.txn([
                  { op: "create", key: "/b/t1", value: "t1" },
                  { op: "update", key: "/b/missing", value: "m", expectedRevision: 1 }
                ])
              ),
              tag(store.update("/b/x", "x1", 1)),
              tag(store.create("/b/a", "dup")),
              tag(
                store.txn([
                  { op: "create", key: "/b/t2", value: "t2" },
                  { op: "check", key: "/b/x", expectedRevision: 1 }
                ])
              ),
              tag(store.create("/b/c", "c"))
            ],
            { concurrency: "unbounded" }
          )
          const after = yield* store.stats
          expect(after.commits - before.commits).toBe(1)
          expect(tags).toEqual(["ok", "Conflict", "NotFound", "ok", "AlreadyExists", "Conflict", "ok"])
          // Only the three successes took revisions, densely, in submission order.
          expect(yield* store.currentRevision).toBe(4)
          expect((yield* store.get("/b/a")).modRevision).toBe(2)
          expect((yield* store.get("/b/x")).value).toBe("x1")
          expect((yield* store.get("/b/c")).modRevision).toBe(4)
          // The failed txn's create was rolled back with it.
          expect(yield* failure(store.get("/b/t1"))).toMatchObject({ value: { _tag: "NotFound" } })
          expect(yield* failure(store.get("/b/t2"))).toMatchObject({ value: { _tag: "NotFound" } })
          const events = yield* Stream.runCollect(Stream.take(store.watch("/b/", 0), 4))
          expect(Chunk.toReadonlyArray(events).map((e) => `${e.type} ${e.revision} ${e.key}`)).toEqual([
            "ADDED 1 /b/x",
            "ADDED 2 /b/a",
            "MODIFIED 3 /b/x",
            "ADDED 4 /b/c"
          ])
        })
      )
    }))

  it.scopedLive("compacts in the background as the policy allows, in batches", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "store.db")
      const compaction = { minRevisions: 10, minAgeMillis: 0, batchRevisions: 7, intervalMillis: 10 }
      yield* withStore({ filename, compaction }, (store) =>
        Effect.gen(function* () {
          for (let i = 0; i < 20; i++) yield* store.create(`/c/${i}`, "v0")
          for (let i = 0; i < 20; i++) yield* store.update(`/c/${i}`, "v1", i + 1)
          for (let i = 0; i < 10; i++) yield* store.delete(`/c/${i}`)
          // 50 revisions; the policy keeps the newest 10.
          yield* eventually(Effect.map(store.compactRevision, (r) => r === 40))
          const stats = yield* store.stats
          expect(stats.compactions).toBeGreaterThanOrEqual(Math.ceil(40 / 7))
          // Revisions 21..40 superseded the creates, 41..50 are kept: 20 creates + 10 updates (<= 40) gone... and no more.
          expect(yield* failure(store.list("/c/", { atRevision: 39 }))).toMatchObject({ value: { _tag: "Compacted" } })
          expect(yield* failure(Stream.runCollect(store.watch("/c/", 39)))).toMatchObject({ value: { _tag: "Compacted" } })
          const at40 = yield* store.list("/c/", { atRevision: 40 })
          expect(at40.items).toHaveLength(20)
          const live = yield* store.list("/c/")
          expect(live.items.map((kv) => kv.key)).toEqual(Array.from({ length: 10 }, (_, i) => `/c/${i + 10}`).sort())
          const events = yield* Stream.runCollect(Stream.take(store.watch("/c/", 40), 10))
          expect(Chunk.toReadonlyArray(events).every((e) => e.type === "DELETED" && e.value === "v1" && e.prevValue === "v1")).toBe(true)
          yield* store.create("/c/more", "m")
          yield* eventually(Effect.map(store.compactRevision, (r) => r === 41))
        })
      )
    }))

  it.scopedLive("keeps history younger than minAgeMillis", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "store.db")
      const compaction = { minRevisions: 1, minAgeMillis: 3_600_000, batchRevisions: 100, intervalMillis: 5 }
      yield* withStore({ filename, compaction }, (store) =>
        Effect.gen(function* () {
          for (let i = 0; i < 30; i++) yield* store.create(`/y/${i}`, "v")
          const woke = (yield* store.stats).compactorWakeups
          yield* eventually(Effect.map(store.stats, (s) => s.compactorWakeups >= woke + 3))
          expect(yield* store.compactRevision).toBe(0)
        })
      )
    }))

  it.scopedLive("serves watch history from the log with previous values", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "store.db")
      // A ring of 2 events forces watchers from the past to read the log.
      yield* withStore({ filename, watchRingEvents: 2 }, (store) =>
        Effect.gen(function* () {
          yield* store.create("/w/a", "a1")
          yield* store.create("/other", "o")
          yield* store.update("/w/a", "a2", 1)
          yield* store.delete("/w/a")
          yield* store.create("/w/a", "a3")
          yield* store.create("/w/b", "b1")
          yield* store.create("/z", "z")
          yield* store.create("/zz", "zz")
          const events = Chunk.toReadonlyArray(yield* Stream.runCollect(Stream.take(store.watch("/w/", 0), 5)))
          expect(events).toEqual<ReadonlyArray<Store.WatchEvent>>([
            { type: "ADDED", revision: 1, key: "/w/a", value: "a1", prevValue: undefined, createRevision: 1, version: 1 },
            { type: "MODIFIED", revision: 3, key: "/w/a", value: "a2", prevValue: "a1", createRevision: 1, version: 2 },
            { type: "DELETED", revision: 4, key: "/w/a", value: "a2", prevValue: "a2", createRevision: 1, version: 3 },
            { type: "ADDED", revision: 5, key: "/w/a", value: "a3", prevValue: undefined, createRevision: 5, version: 1 },
            { type: "ADDED", revision: 6, key: "/w/b", value: "b1", prevValue: undefined, createRevision: 6, version: 1 }
          ])
        })
      )
    }))

  it.scopedLive("lists prefixes by code point, including the empty prefix and non-ASCII keys", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "store.db")
      yield* withStore({ filename }, (store) =>
        Effect.gen(function* () {
          const keys = ["", "a", "a/\u00e9", "a/\uffff", "a/\u{1F600}", "a0", "b", "\u{10FFFF}", "\u{10FFFF}x"]
          for (const k of keys) yield* store.create(k, k)
          expect((yield* store.list("")).items.map((kv) => kv.key)).toEqual(keys)
          expect((yield* store.list("a/")).items.map((kv) => kv.key)).toEqual(["a/\u00e9", "a/\uffff", "a/\u{1F600}"])
          expect(yield* store.count("\u{10FFFF}")).toBe(2)
          const page = yield* store.list("", { limit: 1 })
          expect(page.items.map((kv) => kv.key)).toEqual([""])
          expect(page.remaining).toBe(keys.length - 1)
          const next = yield* store.list("", { limit: 100, continue: page.continue! })
          expect(next.items.map((kv) => kv.key)).toEqual(keys.slice(1))
        })
      )
    }))

  it.scopedLive("answers a repeated small list from memory, exactly: every commit under its prefix shows at once", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "store.db")
      yield* withStore({ filename }, (store) =>
        Effect.gen(function* () {
          const values = (prefix: string) => Effect.map(store.list(prefix), (r) => r.items.map((kv) => kv.value))
          yield* store.create("/registry/quotas/a/q1", "1")
          expect(yield* values("/registry/quotas/a/")).toEqual(["1"])
          // A write under the prefix (create, update, delete, a txn) is in the very next list.
          const created = yield* store.create("/registry/quotas/a/q2", "2")
          expect(yield* values("/registry/quotas/a/")).toEqual(["1", "2"])
          yield* store.update("/registry/quotas/a/q2", "2b", created.modRevision)
          expect(yield* values("/registry/quotas/a/")).toEqual(["1", "2b"])
          yield* store.delete("/registry/quotas/a/q1")
          expect(yield* values("/registry/quotas/a/")).toEqual(["2b"])
          yield* store.txn([{ op: "create", key: "/registry/quotas/a/q3", value: "3" }])
          expect(yield* values("/registry/quotas/a/")).toEqual(["2b", "3"])
          // The enclosing prefix sees them too; a sibling prefix that shares the text does not.
          yield* store.create("/registry/quotas/ab/x", "x")
          expect(yield* values("/registry/quotas/a/")).toEqual(["2b", "3"])
          expect(yield* values("/registry/quotas/")).toEqual(["2b", "3", "x"])
          // A rejected write changes nothing, and a memoized answer is at the current revision.
          expect(yield* tag(store.create("/registry/quotas/a/q3", "again"))).toBe("AlreadyExists")
          yield* store.create("/elsewhere/k", "v")
          const answer = yield* store.list("/registry/quotas/a/")
          expect(answer.revision).toBe(yield* store.currentRevision)
          // Lists at an older revision are read from the log, not from memory.
          const old = yield* store.list("/registry/quotas/a/", { atRevision: created.modRevision })
          expect(old.items.map((kv) => kv.value)).toEqual(["1", "2"])
          // Callers own the items they are given.
          const mine = yield* store.list("/registry/quotas/a/")
          ;(mine.items as Array<Store.KeyValue>).length = 0
          expect(yield* values("/registry/quotas/a/")).toEqual(["2b", "3"])
        })
      )
    }))

  it.scopedLive("fails every operation with Unavailable after close, and drains queued writes first", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "store.db")
      const scope = yield* Scope.make()
      const store = yield* Scope.extend(SqliteStore.make({ filename }), scope)
      yield* store.create("k", "v")
      const watching = yield* Effect.fork(Stream.runCollect(store.watch("", 1)))
      yield* Effect.yieldNow()
      // Queued but not yet flushed when the scope closes: the finalizer commits it.
      const pending = yield* Effect.fork(store.create("queued", "q"))
      yield* Effect.yieldNow()
      yield* Scope.close(scope, Exit.void)
      const queued = yield* pending.await.pipe(Effect.flatten)
      const watchEnd = yield* Effect.flip(watching.await.pipe(Effect.flatten))
      expect(watchEnd._tag).toBe("Unavailable")
      const unavailable = { value: { _tag: "Unavailable" } }
      expect(yield* failure(store.get("k"))).toMatchObject(unavailable)
      expect(yield* failure(store.create("x", "y"))).toMatchObject(unavailable)
      expect(yield* failure(store.update("k", "y", 1))).toMatchObject(unavailable)
      expect(yield* failure(store.delete("k"))).toMatchObject(unavailable)
      expect(yield* failure(store.txn([{ op: "create", key: "t", value: "t" }]))).toMatchObject(unavailable)
      expect(yield* failure(store.list(""))).toMatchObject(unavailable)
      expect(yield* failure(store.count(""))).toMatchObject(unavailable)
      expect(yield* failure(store.currentRevision)).toMatchObject(unavailable)
      expect(yield* failure(store.compact(1))).toMatchObject(unavailable)
      expect(yield* failure(Stream.runCollect(store.watch("", 0)))).toMatchObject(unavailable)
      // Whatever was acknowledged is on disk.
      yield* withStore({ filename }, (again) =>
        Effect.gen(function* () {
          expect((yield* again.get("k")).value).toBe("v")
          expect((yield* again.get("queued")).modRevision).toBe(queued.modRevision)
        })
      )
    }))
})
