/**
 * Applies an image's layers, lowest first, to one directory: the image's root filesystem (what
 * `umoci unpack` does). Each layer is a tar (gzip-compressed or not) whose whiteouts delete what
 * the layers below it left: `.wh.NAME` removes `NAME`, `.wh..wh..opq` empties its directory.
 *
 * Extraction is node-tar's (the npm `tar` package: npm's own, maintained, with the path
 * protections GNU tar has: no absolute paths, no `..`, nothing written through a symlink, a
 * decompression-ratio limit). Owners and modes are kept as the archive has them (the box runs as
 * root; a user-namespaced pod sees them shifted by its mapping).
 *
 * Whiteouts are applied in a first pass over the layer, before its own files are written, so an
 * opaque directory loses only the lower layers' entries, whatever order the archive lists them.
 */
import { lstat, readdir, rm } from "node:fs/promises"
import { basename, dirname, join, posix } from "node:path"
import * as tar from "tar"

/** The prefix of a whiteout entry's name. */
export const whiteoutPrefix = ".wh."
/** The name of an opaque-directory marker. */
export const opaqueMarker = ".wh..wh..opq"

/** What one layer's first pass found. */
export interface Whiteouts {
  /** Paths (relative, normalized) to delete from the layers below. */
  readonly removed: ReadonlyArray<string>
  /** Directories (relative, normalized) whose lower contents go. */
  readonly opaque: ReadonlyArray<string>
}

/** The whiteouts of an entry list (pure: for the tests and the first pass). */
export const whiteoutsOf = (paths: Iterable<string>): Whiteouts => {
  const removed: Array<string> = []
  const opaque: Array<string> = []
  for (const raw of paths) {
    const p = posix.normalize(raw.replace(/^\/+/, "")).replace(/\/+$/, "")
    if (p.startsWith("..")) continue
    const name = posix.basename(p)
    const dir = posix.dirname(p)
    if (name === opaqueMarker) opaque.push(dir === "." ? "" : dir)
    else if (name.startsWith(whiteoutPrefix)) removed.push(posix.join(dir, name.slice(whiteoutPrefix.length)))
  }
  return { removed, opaque }
}

// `rel` under `root`, or undefined when a directory on the way is a symlink or missing (a
// whiteout never follows a link out of the rootfs).
const inside = async (root: string, rel: string): Promise<string | undefined> => {
  const parts = rel.split("/").filter((p) => p !== "" && p !== ".")
  if (parts.some((p) => p === "..")) return undefined
  let at = root
  for (const part of parts.slice(0, -1)) {
    at = join(at, part)
    const st = await lstat(at).catch(() => undefined)
    if (st === undefined || !st.isDirectory()) return undefined
  }
  return join(at, ...parts.slice(-1))
}

const applyWhiteouts = async (root: string, w: Whiteouts): Promise<void> => {
  for (const rel of w.opaque) {
    const dir = rel === "" ? root : await inside(root, rel)
    if (dir === undefined) continue
    const st = await lstat(dir).catch(() => undefined)
    if (st === undefined || !st.isDirectory()) continue
    for (const entry of await readdir(dir)) await rm(join(dir, entry), { recursive: true, force: true })
  }
  for (const rel of w.removed) {
    const target = await inside(root, rel)
    if (target !== undefined) await rm(target, { recursive: true, force: true })
  }
}

/** Apply one layer file (tar, tar+gzip) to `root`. */
export const applyLayer = async (root: string, file: string): Promise<void> => {
  const paths: Array<string> = []
  await tar.t({ file, onReadEntry: (e) => void paths.push(e.path) })
  await applyWhiteouts(root, whiteoutsOf(paths))
  const warnings: Array<string> = []
  await tar.x({
    file,
    cwd: root,
    // Whiteouts are markers, not files.
    filter: (path) => !basename(path).startsWith(whiteoutPrefix),
    chmod: true,
    processUmask: 0,
    // An upper layer's file replaces the lower one (or a symlink in its place) instead of
    // writing through it into another path or a hard-linked twin.
    unlink: true,
    onwarn: (code, message) => {
      // Device nodes are not made (the runtime gives every container its /dev), nor unsafe paths.
      if (code !== "TAR_ENTRY_UNSUPPORTED") warnings.push(`${code}: ${message}`)
    }
  })
  if (warnings.some((w) => w.startsWith("TAR_BAD_ARCHIVE") || w.startsWith("TAR_ABORT") || w.startsWith("ZLIB")))
    throw new Error(`layer ${basename(dirname(file))}/${basename(file)}: ${warnings.join("; ")}`)
}

/** Apply `layers` (files, lowest first) to an empty `root`. */
export const unpack = async (root: string, layers: ReadonlyArray<string>): Promise<void> => {
  for (const layer of layers) await applyLayer(root, layer)
}
