/** The image store of the memory runtime: imports get a stand-in digest, and a name belongs to one image. */
import { Clock, Effect } from "effect"
import type * as Runtime from "../Runtime.js"
import { type Node, iso } from "./memoryNode.js"

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

/** The `Runtime.Images` of a node. */
export const images = (node: Node): Runtime.Images => ({
  import: (request) => importImage(node, request),
  list: Effect.sync(() => [...node.images.values()])
})
