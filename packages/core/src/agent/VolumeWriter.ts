/**
 * The VolumeWriter port: sets up the volumes a `VolumePlan` describes on the node's filesystem —
 * creates emptyDirs, checks or creates hostPaths per their `type`, writes projected files
 * atomically (all files of a volume change together, as the kubelet's AtomicWriter does with its
 * `..data` symlink) and only when their content changed — and removes a pod's directory when the
 * pod is gone. The daemon provides it over node:fs; `makeMemory` keeps files in a map for the
 * agent's unit tests.
 */
import { Context, Effect, Layer } from "effect"
import { VolumeError } from "./AgentError.js"
import type * as VolumePlan from "./VolumePlan.js"

/** The VolumeWriter service. */
export interface VolumeWriterService {
  /** Set up one volume (idempotent; projected files are rewritten only when they changed). */
  readonly prepare: (source: VolumePlan.Source) => Effect.Effect<void, VolumeError>
  /** Remove a pod's directory and everything under it (idempotent). */
  readonly removePod: (podDir: string) => Effect.Effect<void, VolumeError>
}

/** The VolumeWriter port. */
export class VolumeWriter extends Context.Tag("@koder/fleet-core/VolumeWriter")<VolumeWriter, VolumeWriterService>() {}

/** A memory writer and what it holds. */
export interface MemoryWriter {
  readonly service: VolumeWriterService
  /** The files of a projected volume's directory (path → content as written), if set up. */
  readonly files: (dir: string) => ReadonlyMap<string, VolumePlan.File> | undefined
  /** Directories set up so far and not removed. */
  readonly dirs: () => ReadonlyArray<string>
  /** How many times each directory's files were (re)written. */
  readonly writes: (dir: string) => number
  /** Host paths that exist (for `Directory`/`File` hostPath checks); tests add to it. */
  readonly hostPaths: Set<string>
}

/** A writer over maps. */
export const makeMemory = (): MemoryWriter => {
  const volumes = new Map<string, Map<string, VolumePlan.File>>()
  const writes = new Map<string, number>()
  const hostPaths = new Set<string>()
  const same = (a: ReadonlyMap<string, VolumePlan.File> | undefined, b: ReadonlyArray<VolumePlan.File>) =>
    a !== undefined && a.size === b.length && b.every((f) => {
      const x = a.get(f.path)
      return x !== undefined && x.data === f.data && x.encoding === f.encoding && x.mode === f.mode
    })
  return {
    service: {
      prepare: (source) =>
        Effect.suspend(() => {
          switch (source._tag) {
            case "EmptyDir":
              if (!volumes.has(source.path)) volumes.set(source.path, new Map())
              return Effect.void
            case "HostPath":
              if ((source.type === "Directory" || source.type === "File") && !hostPaths.has(source.path)) {
                return Effect.fail(new VolumeError({ volume: source.name, message: `hostPath type check failed: ${source.path} is not a ${source.type === "File" ? "file" : "directory"}` }))
              }
              hostPaths.add(source.path)
              return Effect.void
            case "Files":
              if (!same(volumes.get(source.path), source.files)) {
                volumes.set(source.path, new Map(source.files.map((f) => [f.path, f])))
                writes.set(source.path, (writes.get(source.path) ?? 0) + 1)
              }
              return Effect.void
          }
        }),
      removePod: (podDir) =>
        Effect.sync(() => {
          for (const dir of [...volumes.keys()]) if (dir.startsWith(`${podDir}/`)) volumes.delete(dir)
        })
    },
    files: (dir) => volumes.get(dir),
    dirs: () => [...volumes.keys()],
    writes: (dir) => writes.get(dir) ?? 0,
    hostPaths
  }
}

/** The memory writer as a layer. */
export const layerMemory = (writer: MemoryWriter = makeMemory()): Layer.Layer<VolumeWriter> => Layer.succeed(VolumeWriter, writer.service)
