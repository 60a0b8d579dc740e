/**
 * The process driver's images: rootfs tarballs stored by digest under `<data dir>/images/blobs`,
 * named in `images/index.json` (the runc driver's ImageStore extracts them when it runs one).
 */
import { Runtime } from "@koder/fleet-core"
import { Effect } from "effect"
import { createHash } from "node:crypto"
import { copyFileSync, createReadStream, existsSync, mkdirSync, readFileSync, renameSync, statSync } from "node:fs"
import { join } from "node:path"
import { call, invalid } from "./Driver.js"
import { writeJson } from "./RecordFiles.js"

const now = () => new Date().toISOString()

/** Every imported image. */
export const list = (dataDir: string): Array<Runtime.Image> => {
  try {
    return JSON.parse(readFileSync(join(dataDir, "images", "index.json"), "utf8")) as Array<Runtime.Image>
  } catch {
    return []
  }
}

/** Import a tarball as `NAME:TAG` (the name moves to it from any other image). */
export const importBlob = async (dataDir: string, request: Runtime.ImportRequest): Promise<Runtime.Image> => {
  const name = /:[^/]+$/.test(request.name) ? request.name : `${request.name}:latest`
  if (!/^[a-z0-9][a-z0-9._\-/]*:[\w][\w.-]*$/.test(name)) throw invalid(`name: ${JSON.stringify(request.name)} is not NAME:TAG`)
  let size: number
  try {
    size = statSync(request.path).size
  } catch {
    throw invalid(`path: ${request.path} cannot be read`)
  }
  const hash = createHash("sha256")
  await new Promise<void>((resolve, reject) =>
    createReadStream(request.path).on("data", (b) => hash.update(b)).on("end", resolve).on("error", reject)
  )
  const hex = hash.digest("hex")
  const blobs = join(dataDir, "images", "blobs")
  mkdirSync(blobs, { recursive: true, mode: 0o700 })
  const blob = join(blobs, `sha256-${hex}.tar`)
  if (!existsSync(blob)) {
    copyFileSync(request.path, `${blob}.tmp`)
    renameSync(`${blob}.tmp`, blob)
  }
  const digest = `sha256:${hex}`
  const index = list(dataDir).map((i) => ({ ...i, names: i.names.filter((n) => n !== name) }))
  const existing = index.find((i) => i.digest === digest)
  const image: Runtime.Image = existing
    ? { ...existing, names: [...existing.names, name] }
    : { names: [name], digest, sizeBytes: size, importedAt: now() }
  const next = [...index.filter((i) => i.digest !== digest), image]
  writeJson(join(dataDir, "images", "index.json"), next)
  return image
}

/** The blobs of a data dir as the Runtime port's `Images`. */
export const images = (dataDir: string): Runtime.Images => ({
  import: (request) => call(() => importBlob(dataDir, request)),
  list: call(() => list(dataDir)),
  pull: () => Effect.fail(new Runtime.Unsupported({ message: "the process driver runs commands on the host, not images: nothing is pulled" }))
})
