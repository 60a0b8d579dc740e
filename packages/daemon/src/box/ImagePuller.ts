/**
 * `images.pull` of the runc driver: resolve a reference at its registry, pick the node's platform
 * from an index, fetch the config and the layers the cache lacks, unpack the layers into the
 * image's rootfs, and record the image (names, repository digest, config) in the ImageStore.
 *
 *   ref ─▶ manifest (tag or digest) ─▶ index? ─▶ platform manifest ─▶ config blob
 *                                                                 └▶ layer blobs (cached by digest,
 *                                                                    shared between images)
 *       ─▶ images/sha256/<manifest hex>/rootfs (layers applied in a temp dir, then renamed)
 *
 * Pulls of one reference share one flight: two pods of a new image start one fetch.
 */
import { ImagePull, Runtime } from "@koder/fleet-core"
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs"
import { randomBytes } from "node:crypto"
import { dirname, join } from "node:path"
import type { ImageStore } from "./Images.js"
import { parseReference } from "./Images.js"
import * as LayerUnpack from "./LayerUnpack.js"
import { RegistryClient } from "./RegistryClient.js"
import type * as RegistryConfig from "./RegistryConfig.js"

/** An OCI platform. */
export interface Platform {
  readonly os: string
  readonly architecture: string
  readonly variant?: string
}

/** The node's platform, as OCI names it. */
export const hostPlatform = (): Platform => {
  const arch: Record<string, string> = { x64: "amd64", arm64: "arm64", arm: "arm", ia32: "386", ppc64: "ppc64le", s390x: "s390x", riscv64: "riscv64" }
  return { os: "linux", architecture: arch[process.arch] ?? process.arch, ...(process.arch === "arm" ? { variant: "v7" } : {}) }
}

interface Descriptor {
  readonly mediaType?: string
  readonly digest: string
  readonly size: number
  readonly platform?: { readonly os?: string; readonly architecture?: string; readonly variant?: string }
  readonly urls?: ReadonlyArray<string>
}

const indexTypes = new Set(["application/vnd.oci.image.index.v1+json", "application/vnd.docker.distribution.manifest.list.v2+json"])
const manifestTypes = new Set(["application/vnd.oci.image.manifest.v1+json", "application/vnd.docker.distribution.manifest.v2+json"])
const layerTypes = new Set([
  "application/vnd.oci.image.layer.v1.tar",
  "application/vnd.oci.image.layer.v1.tar+gzip",
  "application/vnd.docker.image.rootfs.diff.tar.gzip",
  "application/vnd.docker.image.rootfs.diff.tar",
  // Non-distributable (Windows base) layers are refused below when they carry only URLs.
  "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
  "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip"
])

const invalid = (message: string) => new Runtime.Invalid({ message })
const digestRe = /^sha256:[0-9a-f]{64}$/

const descriptor = (d: unknown, what: string): Descriptor => {
  const o = d as Descriptor | undefined
  if (o === undefined || typeof o.digest !== "string" || !digestRe.test(o.digest) || typeof o.size !== "number" || o.size < 0)
    throw invalid(`${what}: a descriptor needs a sha256 digest and a size`)
  return o
}

/** Choose the entry of an index for `platform` (exact variant first, then any variant). */
export const choosePlatform = (manifests: ReadonlyArray<Descriptor>, platform: Platform): Descriptor | undefined => {
  const fits = manifests.filter((m) => m.platform?.os === platform.os && m.platform?.architecture === platform.architecture)
  return fits.find((m) => (m.platform?.variant ?? "") === (platform.variant ?? "")) ?? fits[0]
}

/** The config fields a container merges (OCI image config `config`). */
export const configOf = (raw: unknown): Runtime.ImageConfig => {
  const c = ((raw as { config?: Record<string, unknown> } | undefined)?.config ?? {}) as Record<string, unknown>
  const strings = (v: unknown) => (Array.isArray(v) && v.every((x) => typeof x === "string") ? (v as Array<string>) : undefined)
  const entrypoint = strings(c["Entrypoint"])
  const cmd = strings(c["Cmd"])
  const env = strings(c["Env"])
  const workingDir = typeof c["WorkingDir"] === "string" && c["WorkingDir"] !== "" ? c["WorkingDir"] : undefined
  const user = typeof c["User"] === "string" && c["User"] !== "" ? c["User"] : undefined
  return {
    ...(entrypoint === undefined ? {} : { entrypoint }),
    ...(cmd === undefined ? {} : { cmd }),
    ...(env === undefined ? {} : { env }),
    ...(workingDir === undefined ? {} : { workingDir }),
    ...(user === undefined ? {} : { user })
  }
}

/** What the puller counts, for the box's metrics and the tests. */
export interface PullerStats {
  pulls: number
  blobsFetched: number
  bytesFetched: number
}

/** Pulls images into an ImageStore. */
export class ImagePuller {
  private readonly flights = new Map<string, Promise<Runtime.PullResult>>()
  readonly stats: PullerStats = { pulls: 0, blobsFetched: 0, bytesFetched: 0 }

  constructor(
    private readonly store: ImageStore,
    private readonly config: () => RegistryConfig.RegistryConfig,
    private readonly platform: Platform = hostPlatform()
  ) {}

  /** `images.pull`: the held image, or a pull as the policy says. */
  async pull(request: Runtime.PullRequest): Promise<Runtime.PullResult> {
    const started = Date.now()
    const parsed = parseReference(request.image)
    if (typeof parsed === "string" || parsed.name === undefined) throw invalid(`image: ${typeof parsed === "string" ? parsed : `${request.image} is not a valid image reference: it names no repository`}`)
    if (request.policy !== "Always") {
      const held = this.store.find(request.image)
      if (held !== undefined && existsSync(this.store.rootfsOf(held.digest))) return { image: held, pulled: false, fetchedBytes: 0, durationMs: Date.now() - started }
      if (request.policy === "Never")
        throw new Runtime.NotFound({ kind: "image", id: request.image, message: `image ${request.image} is not present with pull policy of Never` })
    }
    // One flight per reference and credentials: a second pod waits for the first fetch.
    const key = `${request.image}|${JSON.stringify(request.credentials ?? [])}`
    let flight = this.flights.get(key)
    if (flight === undefined) {
      flight = this.fetch(request, parsed.name, parsed.tagged, parsed.digest).finally(() => this.flights.delete(key))
      this.flights.set(key, flight)
    }
    const result = await flight
    return { ...result, durationMs: Date.now() - started }
  }

  private async fetch(request: Runtime.PullRequest, name: string, tagged: string | undefined, pinned: string | undefined): Promise<Runtime.PullResult> {
    this.stats.pulls++
    const location = ImagePull.locationOf(request.image)
    const repo = { host: location.host, path: location.path }
    const credentials = request.credentials ?? []
    const client = new RegistryClient(this.config())
    let fetchedBytes = 0
    try {
      const top = await client.manifest(repo, pinned ?? (tagged ?? `${name}:latest`).slice(name.length + 1), credentials)
      let manifest = top
      if (indexTypes.has(top.mediaType)) {
        const index = JSON.parse(top.body.toString("utf8")) as { manifests?: Array<unknown> }
        const entries = (index.manifests ?? []).map((m, i) => descriptor(m, `${request.image}: manifests[${i}]`))
        const chosen = choosePlatform(entries, this.platform)
        if (chosen === undefined) {
          const offered = entries.map((e) => `${e.platform?.os ?? "?"}/${e.platform?.architecture ?? "?"}`).filter((p) => p !== "unknown/unknown")
          throw new Runtime.NotFound({
            kind: "image",
            id: request.image,
            message: `${request.image}: no manifest for ${this.platform.os}/${this.platform.architecture} (the image has ${offered.join(", ") || "none"})`
          })
        }
        manifest = await client.manifest(repo, chosen.digest, credentials)
      }
      if (!manifestTypes.has(manifest.mediaType))
        throw invalid(`${request.image}: unsupported manifest type ${JSON.stringify(manifest.mediaType)} (Docker schema 1 images are not pulled; push the image again with a current client)`)
      const body = JSON.parse(manifest.body.toString("utf8")) as { config?: unknown; layers?: Array<unknown> }
      const configDesc = descriptor(body.config, `${request.image}: config`)
      const layers = (body.layers ?? []).map((l, i) => descriptor(l, `${request.image}: layers[${i}]`))
      for (const [i, l] of layers.entries()) {
        if (l.mediaType !== undefined && !layerTypes.has(l.mediaType))
          throw invalid(`${request.image}: layers[${i}] is ${l.mediaType}, which this node cannot unpack (gzip or plain tar layers only)`)
      }
      // Config and layers the cache lacks, fetched one after another (bounded memory and sockets).
      for (const d of [configDesc, ...layers]) {
        const file = this.store.blobPath(d.digest)
        if (existsSync(file)) continue
        mkdirSync(dirname(file), { recursive: true, mode: 0o700 })
        await client.blob(repo, d.digest, d.size, file, credentials)
        this.stats.blobsFetched++
        this.stats.bytesFetched += d.size
        fetchedBytes += d.size
      }
      let config: Runtime.ImageConfig
      try {
        config = configOf(JSON.parse(readFileSync(this.store.blobPath(configDesc.digest), "utf8")))
      } catch {
        throw invalid(`${request.image}: its config ${configDesc.digest} is not JSON`)
      }
      await this.unpack(manifest.digest, layers.map((l) => this.store.blobPath(l.digest)), request.image)
      this.store.recordBlobs(manifest.digest, [configDesc.digest, ...layers.map((l) => l.digest)])
      const repoName = name
      const image = this.store.record({
        names: tagged === undefined ? [] : [tagged],
        digest: manifest.digest,
        sizeBytes: layers.reduce((n, l) => n + l.size, configDesc.size),
        importedAt: new Date().toISOString(),
        repoDigests: [...new Set([`${repoName}@${top.digest}`, `${repoName}@${manifest.digest}`])],
        config
      })
      return { image, pulled: true, fetchedBytes, durationMs: 0 }
    } finally {
      await client.close()
    }
  }

  // The image's rootfs: layers applied in a temp dir, renamed into place (a crash leaves no half rootfs).
  private async unpack(digest: string, layers: ReadonlyArray<string>, ref: string): Promise<void> {
    const rootfs = this.store.rootfsOf(digest)
    if (existsSync(rootfs)) return
    const parent = dirname(rootfs)
    mkdirSync(parent, { recursive: true, mode: 0o700 })
    const tmp = join(parent, `rootfs.${randomBytes(4).toString("hex")}.tmp`)
    mkdirSync(tmp, { mode: 0o755 })
    try {
      await LayerUnpack.unpack(tmp, layers)
      renameSync(tmp, rootfs)
    } catch (e) {
      rmSync(tmp, { recursive: true, force: true })
      if (existsSync(rootfs)) return
      throw invalid(`${ref}: a layer cannot be unpacked: ${e instanceof Error ? e.message : String(e)}`)
    }
  }
}
