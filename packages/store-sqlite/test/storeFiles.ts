// Temporary store files for tests: each built layer gets its own directory, removed on release.
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { Effect, Layer, type Scope } from "effect"
import type { Store } from "@koder/fleet-core"
import { SqliteStore } from "../src/index.js"

/** A fresh temporary directory for the scope. */
export const tempDir: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "fleet-sqlite-"))),
  (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
)

/** A store on a new file in a new temporary directory, every time the layer is built. */
export const freshLayer = (config: Omit<SqliteStore.Config, "filename"> = {}): Layer.Layer<Store.Store, unknown> =>
  Layer.unwrapScoped(
    Effect.map(tempDir, (dir) => SqliteStore.layer({ ...config, filename: path.join(dir, "store.db") }))
  )
