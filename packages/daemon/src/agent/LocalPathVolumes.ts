/**
 * The node's half of local-path volumes (core's LocalPathProvisioner makes the PersistentVolume):
 * the directory `<dataDir>/storage/pvc-<uid>_<namespace>_<claim>` is made by the volume writer
 * when a pod first mounts it, and removed here once its volume is being deleted.
 *
 *   every intervalMs: each directory under the root ─▶ GET its PersistentVolume (the Node
 *   authorizer lets a node read the local-path volumes made on it)
 *     ─▶ deleting, with the local-path finalizer, and its hostPath is this directory
 *        ─▶ rm -r the directory ─▶ the finalizer removed (a compare-and-swap patch)
 *
 * A directory whose volume cannot be read (404, a refusal, the API away) is left alone: data is
 * never removed on the strength of an answer that might come from the wrong server.
 */
import { type Client, Storage, ResourceRefs } from "@koder/fleet-core"
import { Effect, Schedule } from "effect"
import { readdir, rm } from "node:fs/promises"
import { join } from "node:path"

/** How the sweep is set up. */
export interface Options {
  readonly root: string
  readonly client: Client.Client
  /** Between sweeps (default 5 s). */
  readonly intervalMs?: number
}

const dirName = /^(pvc-[0-9a-z-]+)_/

interface VolumeView {
  readonly metadata?: { readonly deletionTimestamp?: string; readonly resourceVersion?: string; readonly finalizers?: ReadonlyArray<string> }
  readonly spec?: { readonly hostPath?: { readonly path?: string } }
}

/** One pass over the root; answers the directories removed. */
export const sweep = (options: Options): Effect.Effect<ReadonlyArray<string>> =>
  Effect.gen(function* () {
    const entries = yield* Effect.promise(() => readdir(options.root).catch(() => [] as Array<string>))
    const removed: Array<string> = []
    for (const entry of entries) {
      const name = dirName.exec(entry)?.[1]
      if (name === undefined) continue
      const got = yield* Effect.either(options.client.get(ResourceRefs.PersistentVolume, undefined, name))
      if (got._tag === "Left") continue
      const pv = got.right as VolumeView
      const finalizers = pv.metadata?.finalizers ?? []
      const dir = join(options.root, entry)
      if (pv.metadata?.deletionTimestamp === undefined || !finalizers.includes(Storage.LocalPathFinalizer) || pv.spec?.hostPath?.path !== dir) continue
      const gone = yield* Effect.promise(() => rm(dir, { recursive: true, force: true }).then(() => true, () => false))
      if (!gone) continue
      removed.push(dir)
      yield* Effect.ignore(
        options.client.patch(ResourceRefs.PersistentVolume, undefined, name, "merge", {
          metadata: { resourceVersion: pv.metadata.resourceVersion, finalizers: finalizers.filter((f) => f !== Storage.LocalPathFinalizer) }
        })
      )
    }
    return removed
  })

/** Sweep for as long as the scope lives. */
export const run = (options: Options): Effect.Effect<void> =>
  Effect.repeat(sweep(options), Schedule.spaced(`${options.intervalMs ?? 5000} millis`)).pipe(Effect.asVoid)
