// The store file and its WAL are the owner's alone (0600): they hold every object of the cluster.
import * as fs from "node:fs"
import * as path from "node:path"
import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqliteStore } from "../src/index.js"
import { tempDir } from "./storeFiles.js"

const modeOf = (file: string) => fs.statSync(file).mode & 0o777

describe("SqliteStore file modes", () => {
  it.scopedLive("creates the database and its WAL 0600", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "state.db")
      yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* SqliteStore.make({ filename })
          yield* store.create("/registry/secrets/default/s", "sealed")
          expect(fs.existsSync(`${filename}-wal`)).toBe(true)
          expect(modeOf(filename)).toBe(0o600)
          expect(modeOf(`${filename}-wal`)).toBe(0o600)
        })
      )
    })
  )

  it.scopedLive("narrows an existing world-readable database and WAL to 0600 when it opens them", () =>
    Effect.gen(function* () {
      const filename = path.join(yield* tempDir, "state.db")
      yield* Effect.scoped(Effect.flatMap(SqliteStore.make({ filename }), (store) => store.create("/k", "v")))
      fs.chmodSync(filename, 0o644)
      if (fs.existsSync(`${filename}-wal`)) fs.chmodSync(`${filename}-wal`, 0o644)
      yield* Effect.scoped(
        Effect.gen(function* () {
          const store = yield* SqliteStore.make({ filename })
          yield* store.create("/k2", "v2")
          expect(modeOf(filename)).toBe(0o600)
          expect(modeOf(`${filename}-wal`)).toBe(0o600)
        })
      )
    })
  )
})
