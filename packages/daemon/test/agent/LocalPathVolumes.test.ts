/**
 * The agent's sweep of local-path directories against a real API (a test cluster): a directory
 * goes only when its volume is being deleted, holds the local-path finalizer and names this very
 * directory; then the finalizer is removed and the volume is gone. Anything else is left alone.
 */
import { it } from "@effect/vitest"
import { ResourceRefs, Storage } from "@koder/fleet-core"
import { TestCluster } from "@koder/fleet-core/testing"
import { Effect } from "effect"
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { describe, expect } from "vitest"
import * as LocalPathVolumes from "../../src/agent/LocalPathVolumes.js"

describe("LocalPathVolumes.sweep", () => {
  it.live("removes the directories of volumes being deleted, then their finalizer; keeps the rest", () =>
    Effect.scoped(
      Effect.gen(function* () {
        const cluster = yield* TestCluster.make({ nodes: [], scheduler: false })
        const root = mkdtempSync(join(tmpdir(), "fleet-localpath-"))
        yield* Effect.addFinalizer(() => Effect.sync(() => rmSync(root, { recursive: true, force: true })))
        const dir = (name: string) => {
          const d = join(root, `${name}_default_data`)
          mkdirSync(d)
          writeFileSync(join(d, "file"), "data")
          return d
        }
        const volume = (name: string, path: string) =>
          cluster.client.create({
            apiVersion: "v1",
            kind: "PersistentVolume",
            metadata: { name, finalizers: [Storage.LocalPathFinalizer], annotations: { [Storage.ProvisionedByAnnotation]: Storage.LocalPathProvisioner } },
            spec: { capacity: { storage: "1Gi" }, accessModes: ["ReadWriteOnce"], hostPath: { path, type: "DirectoryOrCreate" } }
          })
        const gone = dir("pvc-gone")
        yield* volume("pvc-gone", gone)
        yield* cluster.client.delete(ResourceRefs.PersistentVolume, undefined, "pvc-gone")
        const live = dir("pvc-live")
        yield* volume("pvc-live", live)
        // Its volume names another directory: not this one's to remove.
        const elsewhere = dir("pvc-elsewhere")
        yield* volume("pvc-elsewhere", "/srv/somewhere-else")
        yield* cluster.client.delete(ResourceRefs.PersistentVolume, undefined, "pvc-elsewhere")
        // No volume at all (another server, a restore): kept.
        const orphan = dir("pvc-orphan")

        const removed = yield* LocalPathVolumes.sweep({ root, client: cluster.client })
        expect(removed).toEqual([gone])
        expect(existsSync(gone)).toBe(false)
        for (const kept of [live, elsewhere, orphan]) expect(existsSync(join(kept, "file"))).toBe(true)
        const after = yield* Effect.either(cluster.client.get(ResourceRefs.PersistentVolume, undefined, "pvc-gone"))
        expect(after._tag === "Left" && after.left.status.code).toBe(404)
        // A second pass changes nothing.
        expect(yield* LocalPathVolumes.sweep({ root, client: cluster.client })).toEqual([])
      })
    )
  )
})
