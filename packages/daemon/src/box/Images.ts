/**
 * The box's image store: rootfs tarballs (plain tar or compressed, no OCI manifest) imported
 * under `NAME:TAG`, stored by the sha256 of the tarball and extracted once, for the runc driver
 * to run. It implements the Runtime port's `Images` and `koder-fleet box image ...`.
 *
 *   tarball ─▶ sha256 ─▶ images/sha256/<hex>/rootfs/ (system `tar`, into a temp dir, renamed)
 *                     └▶ images/index.json: [{names: ["NAME:TAG"...], digest, sizeBytes, importedAt}]
 *   ref (NAME:TAG | NAME@sha256:<hex> | NAME:TAG@sha256:<hex> | sha256:<hex>) ─▶ resolve ─▶ rootfs dir
 *
 * The index has the shape the process driver writes (it keeps imported tarballs under
 * `images/blobs/` without running them), so one data dir serves both drivers: an image the
 * process driver imported is extracted from its blob the first time the runc driver resolves it.
 * The index is read on every call, never cached, so an import from the CLI is seen by a running
 * box at once.
 */
import { Runtime } from "@koder/fleet-core"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { createHash, randomBytes } from "node:crypto"
import { createReadStream, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, statfsSync, writeFileSync } from "node:fs"
import { homedir } from "node:os"
import { join, resolve as resolvePath } from "node:path"
import { parseArgs } from "node:util"
import type { ImagePuller } from "./ImagePuller.js"

/** An image resolved for a container: its record and the extracted root filesystem. */
export interface Resolved {
  readonly image: Runtime.Image
  /** `sha256:<hex>`. */
  readonly digest: string
  /** Absolute path of the extracted rootfs (read-only by convention: containers get a copy or an overlay). */
  readonly rootfs: string
}

/** A parsed image reference. */
export interface Reference {
  /** `NAME` without tag (absent for a bare `sha256:<hex>`). */
  readonly name?: string
  /** `NAME:TAG`, when a tag was given, or `NAME:latest` when neither tag nor digest was. */
  readonly tagged?: string
  /** `sha256:<hex>`, when the reference pins one. */
  readonly digest?: string
}

// A repository, optionally behind a registry host with a port (`127.0.0.1:5000/busybox`).
const nameRe = /^(?:[a-zA-Z0-9.-]+(?::\d+)?\/)?[a-z0-9][a-z0-9._\-/]*$/
const tagRe = /^[\w][\w.-]{0,127}$/
const digestRe = /^sha256:[0-9a-f]{64}$/

/**
 * Normalize `NAME[:TAG]` to `NAME:TAG` (`latest` by default); `undefined` when malformed. The
 * tag is what follows the last `:` after the last `/` (a registry host may carry a port).
 */
export const normalizeName = (name: string): string | undefined => {
  const slash = name.lastIndexOf("/")
  const colon = name.lastIndexOf(":")
  const [repo, tag] = colon > slash ? [name.slice(0, colon), name.slice(colon + 1)] : [name, "latest"]
  return nameRe.test(repo) && tagRe.test(tag) ? `${repo}:${tag}` : undefined
}

/** Parse a reference a container may use; a string is what is wrong with it. */
export const parseReference = (ref: string): Reference | string => {
  if (digestRe.test(ref)) return { digest: ref }
  const at = ref.indexOf("@")
  const digest = at < 0 ? undefined : ref.slice(at + 1)
  if (digest !== undefined && !digestRe.test(digest)) return `${JSON.stringify(ref)}: the digest must be sha256:<64 hex digits>`
  const head = at < 0 ? ref : ref.slice(0, at)
  const slash = head.lastIndexOf("/")
  const colon = head.lastIndexOf(":")
  const hasTag = colon > slash
  const name = hasTag ? head.slice(0, colon) : head
  if (!nameRe.test(name)) return `${JSON.stringify(ref)} is not NAME:TAG or NAME@sha256:<hex>`
  if (hasTag && !tagRe.test(head.slice(colon + 1))) return `${JSON.stringify(ref)}: malformed tag`
  const tagged = hasTag ? head : digest === undefined ? `${name}:latest` : undefined
  return { name, ...(tagged === undefined ? {} : { tagged }), ...(digest === undefined ? {} : { digest }) }
}

const now = () => new Date().toISOString()

/** Write a file atomically (sibling, then rename): a reader never sees half an index. */
const writeJson = (path: string, value: unknown) => {
  const tmp = `${path}.${randomBytes(4).toString("hex")}.tmp`
  writeFileSync(tmp, JSON.stringify(value), { mode: 0o600 })
  renameSync(tmp, path)
}

/** sha256 of a file, streamed. */
const sha256File = (path: string) =>
  new Promise<string>((resolve, reject) => {
    const hash = createHash("sha256")
    createReadStream(path)
      .on("data", (b) => hash.update(b))
      .on("end", () => resolve(hash.digest("hex")))
      .on("error", reject)
  })

/**
 * Extract a tarball with the system's GNU `tar`: it detects gzip/xz/bzip2 by itself, keeps
 * owners (numerically: the host's /etc/passwd means nothing to the image) and modes when root,
 * refuses members with `..`, and defers symlinks that point outside (so a link followed by a file
 * through it cannot write outside the target).
 */
const untar = (file: string, dir: string) =>
  new Promise<void>((resolve, reject) => {
    const child = spawn("tar", ["-x", "-f", file, "-C", dir, "--numeric-owner"], { stdio: ["ignore", "ignore", "pipe"] })
    let err = ""
    child.stderr!.on("data", (b: Buffer) => (err = (err + b.toString()).slice(-2000)))
    child.once("error", (e) => reject(new Error(`tar: ${e.message}`)))
    child.once("close", (code) => (code === 0 ? resolve() : reject(new Error(err.trim() || `tar exited ${code}`))))
  })

const invalid = (message: string) => new Runtime.Invalid({ message })

/** The image store of a data dir. */
export class ImageStore {
  private constructor(readonly dataDir: string) {}

  /** Open (and create) the store under a box data dir. */
  static open(dataDir: string): ImageStore {
    mkdirSync(join(dataDir, "images", "sha256"), { recursive: true, mode: 0o700 })
    return new ImageStore(dataDir)
  }

  private get indexFile() {
    return join(this.dataDir, "images", "index.json")
  }

  /** The directory an image's rootfs is extracted to. */
  rootfsOf(digest: string): string {
    return join(this.dataDir, "images", "sha256", digest.slice("sha256:".length), "rootfs")
  }

  /** Where blob `digest` (a layer, config or manifest of a pulled image) is cached, shared by every image. */
  blobPath(digest: string): string {
    return join(this.dataDir, "images", "blobs", "sha256", digest.slice("sha256:".length))
  }

  /** The image `ref` names, if held (by tag, or by a repository digest or image digest when pinned). */
  find(ref: string): Runtime.Image | undefined {
    const parsed = parseReference(ref)
    if (typeof parsed === "string") return undefined
    const index = this.list()
    if (parsed.digest !== undefined) {
      const repoDigest = parsed.name === undefined ? undefined : `${parsed.name}@${parsed.digest}`
      return index.find((i) => repoDigest !== undefined && (i.repoDigests ?? []).includes(repoDigest)) ?? index.find((i) => i.digest === parsed.digest && parsed.name === undefined)
    }
    return index.find((i) => parsed.tagged !== undefined && i.names.includes(parsed.tagged))
  }

  /**
   * Record a pulled image (its rootfs already in place): its names move to it from any other
   * image, its repository digests are added to what it had.
   */
  record(image: Runtime.Image): Runtime.Image {
    const index = this.list().map((i) => ({ ...i, names: i.names.filter((n) => !image.names.includes(n)) }))
    const existing = index.find((i) => i.digest === image.digest)
    const merged: Runtime.Image = existing
      ? { ...existing, ...image, names: [...new Set([...existing.names, ...image.names])], repoDigests: [...new Set([...(existing.repoDigests ?? []), ...(image.repoDigests ?? [])])], importedAt: existing.importedAt }
      : image
    writeJson(this.indexFile, [...index.filter((i) => i.digest !== image.digest), merged])
    return merged
  }

  /** Remember which blobs a pulled image is made of (for the garbage collector). */
  recordBlobs(digest: string, blobs: ReadonlyArray<string>): void {
    const dir = join(this.rootfsOf(digest), "..")
    mkdirSync(dir, { recursive: true, mode: 0o700 })
    writeJson(join(dir, "blobs.json"), blobs)
  }

  private blobsOf(digest: string): ReadonlyArray<string> {
    try {
      return JSON.parse(readFileSync(join(this.rootfsOf(digest), "..", "blobs.json"), "utf8")) as Array<string>
    } catch {
      return []
    }
  }

  /**
   * The kubelet's image garbage collection: when the disk holding the images is fuller than
   * `highPercent`, remove images no container uses, least recently pulled first, until it is
   * below `lowPercent`; then the cached blobs no remaining image is made of. Answers what went.
   */
  gc(options: { readonly inUse: ReadonlySet<string>; readonly highPercent: number; readonly lowPercent: number }): { readonly images: ReadonlyArray<string>; readonly blobs: number } {
    const usedPercent = () => {
      const st = statfsSync(join(this.dataDir, "images"))
      return st.blocks === 0 ? 0 : (100 * (st.blocks - st.bavail)) / st.blocks
    }
    if (usedPercent() <= options.highPercent) return { images: [], blobs: 0 }
    const removed: Array<string> = []
    const candidates = this.list()
      .filter((i) => !options.inUse.has(i.digest))
      .sort((a, b) => a.importedAt.localeCompare(b.importedAt))
    for (const image of candidates) {
      if (usedPercent() < options.lowPercent) break
      // Out of the index first: a container created from now on cannot find a half-removed image.
      writeJson(this.indexFile, this.list().filter((i) => i.digest !== image.digest))
      rmSync(join(this.rootfsOf(image.digest), ".."), { recursive: true, force: true })
      rmSync(join(this.dataDir, "images", "blobs", `sha256-${image.digest.slice("sha256:".length)}.tar`), { force: true })
      removed.push(image.digest)
    }
    const kept = new Set(this.list().flatMap((i) => this.blobsOf(i.digest)))
    let blobs = 0
    const dir = join(this.dataDir, "images", "blobs", "sha256")
    for (const hex of existsSync(dir) ? readdirSync(dir) : []) {
      if (kept.has(`sha256:${hex}`)) continue
      rmSync(join(dir, hex), { force: true })
      blobs++
    }
    return { images: removed, blobs }
  }

  /** Every imported image. */
  list(): Array<Runtime.Image> {
    try {
      return JSON.parse(readFileSync(this.indexFile, "utf8")) as Array<Runtime.Image>
    } catch {
      return []
    }
  }

  /**
   * Import a rootfs tarball under `name` (`NAME:TAG`; `NAME` means `NAME:latest`). The same
   * tarball imported again is not extracted again; the name moves to the newest digest.
   */
  async importImage(request: { readonly file: string; readonly name: string }): Promise<Runtime.Image> {
    const name = normalizeName(request.name)
    if (name === undefined) throw invalid(`name: ${JSON.stringify(request.name)} is not NAME:TAG`)
    let size: number
    try {
      const st = statSync(request.file)
      if (!st.isFile()) throw new Error("not a file")
      size = st.size
    } catch {
      throw invalid(`path: ${request.file} cannot be read`)
    }
    const hex = await sha256File(request.file)
    const digest = `sha256:${hex}`
    await this.extract(digest, request.file)
    // Read, change and write the index with no await in between: imports in this process never
    // lose each other's names.
    const index = this.list().map((i) => ({ ...i, names: i.names.filter((n) => n !== name) }))
    const existing = index.find((i) => i.digest === digest)
    const image: Runtime.Image = existing
      ? { ...existing, names: [...existing.names, name] }
      : { names: [name], digest, sizeBytes: size, importedAt: now() }
    writeJson(this.indexFile, [...index.filter((i) => i.digest !== digest), image])
    return image
  }

  /** Extract a tarball as `digest`'s rootfs unless it is there: into a temp dir, then renamed. */
  private async extract(digest: string, file: string): Promise<string> {
    const rootfs = this.rootfsOf(digest)
    if (existsSync(rootfs)) return rootfs
    const parent = join(rootfs, "..")
    mkdirSync(parent, { recursive: true, mode: 0o700 })
    const tmp = join(parent, `rootfs.${randomBytes(4).toString("hex")}.tmp`)
    mkdirSync(tmp, { mode: 0o755 })
    try {
      await untar(file, tmp)
      renameSync(tmp, rootfs)
    } catch (e) {
      rmSync(tmp, { recursive: true, force: true })
      // Another import of the same tarball won the rename: its rootfs is as good.
      if (existsSync(rootfs)) return rootfs
      throw invalid(`path: ${file} is not a readable tar archive: ${e instanceof Error ? e.message : String(e)}`)
    }
    return rootfs
  }

  /**
   * The image a container's `image` names. A digest-pinned reference must match: the image
   * with that digest must carry the name (and the tag, when one is given) of the reference.
   */
  async resolve(ref: string): Promise<Resolved> {
    const parsed = parseReference(ref)
    if (typeof parsed === "string") throw invalid(`image: ${parsed}`)
    const notFound = (why: string) => new Runtime.NotFound({ kind: "image", id: ref, message: `image ${ref}: ${why}` })
    const index = this.list()
    // A pulled image pinned by its repository digest (of its manifest or index) is that image.
    if (parsed.name !== undefined && parsed.digest !== undefined) {
      const pinned = index.find((i) => (i.repoDigests ?? []).includes(`${parsed.name}@${parsed.digest}`))
      if (pinned !== undefined) return this.ready(pinned)
    }
    let image: Runtime.Image | undefined
    if (parsed.tagged !== undefined) {
      image = index.find((i) => i.names.includes(parsed.tagged!))
      if (image === undefined) throw notFound("not pulled or imported (koder-fleet box image import FILE --name NAME:TAG)")
      if (parsed.digest !== undefined && image.digest !== parsed.digest)
        throw notFound(`${parsed.tagged} is ${image.digest}, not the pinned digest`)
    } else {
      image = index.find((i) => i.digest === parsed.digest)
      if (image === undefined) throw notFound("no image has this digest")
      if (parsed.name !== undefined && !image.names.some((n) => n.startsWith(`${parsed.name}:`)))
        throw notFound(`the image with this digest is not named ${parsed.name} (it is ${image.names.join(", ") || "unnamed"})`)
    }
    return this.ready(image)
  }

  /** An image of the index with its rootfs on disk (extracted now from an imported blob if need be). */
  private async ready(image: Runtime.Image): Promise<Resolved> {
    const notFound = (why: string) => new Runtime.NotFound({ kind: "image", id: image.digest, message: `image ${image.names[0] ?? image.digest}: ${why}` })
    const rootfs = this.rootfsOf(image.digest)
    if (!existsSync(rootfs)) {
      // Imported by the process driver, which keeps the tarball: extract it now.
      const blob = join(this.dataDir, "images", "blobs", `sha256-${image.digest.slice("sha256:".length)}.tar`)
      if (!existsSync(blob)) throw notFound(`its files are gone from ${rootfs}`)
      await this.extract(image.digest, blob)
    }
    return { image, digest: image.digest, rootfs }
  }
}

const isRuntimeError = (e: unknown): e is Runtime.Invalid | Runtime.Unavailable =>
  e instanceof Runtime.Invalid || e instanceof Runtime.Unavailable

/** The store as the Runtime port's `Images`; with a puller, images are pulled from registries. */
export const toImages = (store: ImageStore, puller?: ImagePuller): Runtime.Images => ({
  import: (request) =>
    Effect.tryPromise({
      try: () => store.importImage({ file: request.path, name: request.name }),
      catch: (e) => (isRuntimeError(e) ? e : new Runtime.Unavailable({ message: e instanceof Error ? e.message : String(e) }))
    }),
  list: Effect.sync(() => store.list()),
  pull: (request) =>
    puller === undefined
      ? Effect.fail(new Runtime.Unsupported({ message: "this driver runs commands, not images: nothing is pulled" }))
      : Effect.tryPromise({
          try: () => puller.pull(request),
          catch: (e) =>
            e instanceof Runtime.Invalid || e instanceof Runtime.Unavailable || e instanceof Runtime.NotFound
              ? e
              : new Runtime.Unavailable({ message: e instanceof Error ? e.message : String(e) })
        })
})

/** `koder-fleet box image --help`. */
export const usage = `usage: koder-fleet box image import FILE --name NAME:TAG [--data-dir DIR]
       koder-fleet box image list [--data-dir DIR]

  import   store a rootfs tarball (tar, tar.gz, tar.xz) under NAME:TAG, by its sha256 digest;
           pods then use image NAME:TAG or NAME@sha256:<hex> with the runc driver
  list     the imported images
  --data-dir DIR   the box's data dir (default ~/.koder-fleet/box, env FLEET_DATA_DIR/box)`

/** `koder-fleet box image ...` (the arguments after `image`): returns the exit code. */
export const cli = async (args: ReadonlyArray<string>): Promise<number> => {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(usage)
    return 0
  }
  let parsed: { values: Record<string, string | boolean | undefined>; positionals: Array<string> }
  try {
    parsed = parseArgs({
      args: [...args],
      options: { name: { type: "string" }, "data-dir": { type: "string" } },
      strict: true,
      allowPositionals: true
    })
  } catch (e) {
    console.error(`koder-fleet box image: ${e instanceof Error ? e.message : String(e)}\n\n${usage}`)
    return 2
  }
  const [command, ...rest] = parsed.positionals
  const name = parsed.values.name as string | undefined
  const dataDir = resolvePath(
    (parsed.values["data-dir"] as string | undefined) ?? join(process.env.FLEET_DATA_DIR ?? join(homedir(), ".koder-fleet"), "box")
  )
  const usageError = (why: string) => {
    console.error(`koder-fleet box image: ${why}\n\n${usage}`)
    return 2
  }
  try {
    if (command === "import") {
      if (rest.length !== 1) return usageError("import takes one FILE")
      if (name === undefined) return usageError("import needs --name NAME:TAG")
      const image = await ImageStore.open(dataDir).importImage({ file: resolvePath(rest[0]!), name })
      console.log(`imported ${normalizeName(name)} ${image.digest} (${image.sizeBytes} bytes) into ${dataDir}`)
      return 0
    }
    if (command === "list") {
      if (rest.length !== 0) return usageError("list takes no arguments")
      for (const i of ImageStore.open(dataDir).list())
        console.log(`${i.digest}  ${String(i.sizeBytes).padStart(12)}  ${i.importedAt}  ${i.names.join(" ")}`)
      return 0
    }
    return usageError(command === undefined ? "a command is needed" : `unknown command ${JSON.stringify(command)}`)
  } catch (e) {
    console.error(`koder-fleet box image: ${e instanceof Runtime.Invalid ? e.message : e instanceof Error ? e.message : String(e)}`)
    return 1
  }
}
