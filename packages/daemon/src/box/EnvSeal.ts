/**
 * Container environments in the box's records, sealed: a container's `env` (Secret values among
 * them) is kept in the driver's memory and written to `state.json` only as an AES-256-GCM
 * envelope (node:crypto), so a restarted box still has it (a created container it starts, an exec
 * into a running one) while the data dir never holds a value in the clear.
 *
 *   record on disk: { ...rec, spec: { ...spec, env: undefined }, sealedEnv: "kbox:env:aesgcm:v1:" + base64(nonce ‖ ciphertext ‖ tag) }
 *   key: 32 random bytes in `<dir>/env.key` (0600), made on first use; the process driver keeps it
 *        in its run directory on /dev/shm (memory: a stolen disk opens nothing, and the key goes with
 *        a host restart, as do the containers it protects), the runc driver in its data dir
 *
 * A record whose envelope cannot be opened (the key is gone) has no environment: the driver treats
 * a container that never started as lost.
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { readFileSync, renameSync, writeFileSync } from "node:fs"
import { join } from "node:path"

const prefix = "kbox:env:aesgcm:v1:"

/** The key file's name in the directory given to `load`. */
export const keyFile = "env.key"

/** A node-local sealing key. */
export interface EnvSeal {
  /** Seal an environment (the JSON of the map). */
  readonly seal: (env: Readonly<Record<string, string>>) => string
  /** Open a sealed environment; undefined when it cannot be opened (another key, damaged). */
  readonly open: (sealed: string) => Record<string, string> | undefined
}

/** The key in `dir`, made (0600, written atomically) if it is not there. */
export const load = (dir: string): EnvSeal => {
  const file = join(dir, keyFile)
  let key: Buffer | undefined
  try {
    const raw = readFileSync(file)
    if (raw.length === 32) key = raw
  } catch {
    // not made yet
  }
  if (key === undefined) {
    key = randomBytes(32)
    const tmp = `${file}.${process.pid}.tmp`
    writeFileSync(tmp, key, { mode: 0o600 })
    renameSync(tmp, file)
  }
  return make(key)
}

/** A seal over a given 32-byte key. */
export const make = (key: Buffer): EnvSeal => ({
  seal: (env) => {
    const nonce = randomBytes(12)
    const cipher = createCipheriv("aes-256-gcm", key, nonce)
    const body = Buffer.concat([cipher.update(JSON.stringify(env), "utf8"), cipher.final()])
    return prefix + Buffer.concat([nonce, body, cipher.getAuthTag()]).toString("base64")
  },
  open: (sealed) => {
    if (!sealed.startsWith(prefix)) return undefined
    try {
      const raw = Buffer.from(sealed.slice(prefix.length), "base64")
      const decipher = createDecipheriv("aes-256-gcm", key, raw.subarray(0, 12))
      decipher.setAuthTag(raw.subarray(raw.length - 16))
      const text = Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString("utf8")
      const env = JSON.parse(text) as unknown
      return typeof env === "object" && env !== null && !Array.isArray(env) ? (env as Record<string, string>) : undefined
    } catch {
      return undefined
    }
  }
})

/** A record as written to disk: its spec's `env` replaced by `sealedEnv`. */
export const toDisk = <R extends { readonly spec: { readonly env?: Readonly<Record<string, string>> | undefined } }>(
  rec: R,
  sealed: string | undefined
): unknown => {
  const { env: _env, ...spec } = rec.spec
  return { ...rec, spec, ...(sealed === undefined ? {} : { sealedEnv: sealed }) }
}

/**
 * A record read from disk with its environment back in its spec (`ok` false: it was sealed and
 * could not be opened). A record written in the clear by an older box keeps its `env`.
 */
export const fromDisk = <R extends { readonly spec: { readonly env?: Readonly<Record<string, string>> | undefined } }>(
  parsed: R & { readonly sealedEnv?: string },
  seal: EnvSeal
): { readonly rec: R; readonly sealed: string | undefined; readonly ok: boolean } => {
  const { sealedEnv, ...rest } = parsed
  if (sealedEnv === undefined) return { rec: rest as unknown as R, sealed: undefined, ok: true }
  const env = seal.open(sealedEnv)
  const rec = { ...rest, spec: { ...rest.spec, ...(env === undefined ? {} : { env }) } } as unknown as R
  return { rec, sealed: sealedEnv, ok: env !== undefined }
}
