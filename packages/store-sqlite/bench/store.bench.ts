// The store benchmark against SQLite as deployed: durable (synchronous=FULL), on a temp file.
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { StoreBench } from "@koder/fleet-core/bench"
import { Effect, Layer } from "effect"
import { SqliteStore } from "../src/index.js"

const layer = Layer.unwrapScoped(
  Effect.map(
    Effect.acquireRelease(
      Effect.sync(() => fs.mkdtempSync(path.join(os.tmpdir(), "fleet-bench-"))),
      (dir) => Effect.sync(() => fs.rmSync(dir, { recursive: true, force: true }))
    ),
    (dir) => SqliteStore.layer({ filename: path.join(dir, "store.db"), synchronous: "FULL" })
  )
)

await Effect.runPromise(StoreBench.run("sqlite", layer))
