/** The image store of the memory runtime: imports get a stand-in digest, and a name belongs to one image. */
import { Clock, Effect } from "effect"
import * as Runtime from "../Runtime.js"
import { type Node, iso, record } from "./memoryNode.js"

/** A stand-in digest: stable per path, shaped like the real one. */
const digestOf = (path: string): string => {
  let h = 0
  for (const ch of path) h = (Math.imul(h, 31) + ch.charCodeAt(0)) | 0
  return `sha256:${(h >>> 0).toString(16).padStart(64, "0")}`
}

/** `Images.import`: add the name to the image of this path, taking it from any other image. */
const importImage = (node: Node, request: Runtime.ImportRequest): Effect.Effect<Runtime.Image> =>
  Effect.gen(function* () {
    const now = yield* Clock.currentTimeMillis
    const digest = digestOf(request.path)
    const prev = node.images.get(digest)
    const names = [...new Set([...(prev?.names ?? []), request.name])]
    const image: Runtime.Image = { names, digest, sizeBytes: 0, importedAt: prev?.importedAt ?? iso(now) }
    for (const [d, i] of node.images)
      if (d !== digest && i.names.includes(request.name))
        node.images.set(d, { ...i, names: i.names.filter((n) => n !== request.name) })
    node.images.set(digest, image)
    return image
  })

/** `NAME:TAG` of a reference (the digest, if any, is not simulated). */
const taggedOf = (ref: string): string => {
  const head = ref.split("@")[0]!
  return head.lastIndexOf(":") > head.lastIndexOf("/") ? head : `${head}:latest`
}

/**
 * `Images.pull` from the node's simulated registry: a held image is used unless the policy is
 * `Always`; a private image needs its username and password among the credentials.
 */
const pull = (node: Node, request: Runtime.PullRequest): Effect.Effect<Runtime.PullResult, Runtime.NotFound | Runtime.Invalid | Runtime.Unavailable> =>
  Effect.gen(function* () {
    const name = taggedOf(request.image)
    const digest = digestOf(`registry:${name}`)
    const held = node.images.get(digest)
    if (held !== undefined && request.policy !== "Always") return { image: held, pulled: false, fetchedBytes: 0, durationMs: 0 }
    if (request.policy === "Never")
      return yield* Effect.fail(new Runtime.NotFound({ kind: "image", id: request.image, message: `image ${request.image} is not present with pull policy of Never` }))
    record(node, "image.pull", request.image)
    const remote = node.registry.get(name)
    if (remote?.unreachable === true) return yield* Effect.fail(new Runtime.Unavailable({ message: `pulling ${request.image}: connection refused` }))
    if (remote === undefined) return yield* Effect.fail(new Runtime.NotFound({ kind: "image", id: request.image, message: `${request.image}: manifest unknown` }))
    if (remote.password !== undefined && !(request.credentials ?? []).some((c) => c.username === remote.username && c.password === remote.password))
      return yield* Effect.fail(new Runtime.Invalid({ message: `pulling ${request.image}: unauthorized: authentication required` }))
    const now = yield* Clock.currentTimeMillis
    const repo = name.slice(0, name.lastIndexOf(":"))
    const image: Runtime.Image = {
      names: [name],
      digest,
      sizeBytes: 0,
      importedAt: held?.importedAt ?? iso(now),
      repoDigests: [`${repo}@${digest}`],
      ...(remote.config === undefined ? {} : { config: remote.config })
    }
    node.images.set(digest, image)
    return { image, pulled: true, fetchedBytes: held === undefined ? 1 : 0, durationMs: 0 }
  })

/** The `Runtime.Images` of a node. */
export const images = (node: Node): Runtime.Images => ({
  import: (request) => importImage(node, request),
  pull: (request) =>
    node.info.capabilities.imagePull === true
      ? pull(node, request)
      : Effect.fail(new Runtime.Unsupported({ message: `the ${node.info.driver} runtime runs commands, not images` })),
  list: Effect.sync(() => [...node.images.values()])
})
