/**
 * Secrets at rest (DESIGN §10): Secret objects are sealed with AES-256-GCM before they reach the
 * store, in an envelope that names its key, so keys can rotate: the first key seals, every listed
 * key opens, and an object is re-sealed with the new key whenever it is next written.
 *
 *   key source: DIR/encryption-keys (generated, 0600) │ --encryption-key-file │ --kms-url (unwrap at boot)
 *   store value: "fleet:enc:aesgcm:v1:<key>:" + base64(nonce ‖ ciphertext ‖ tag)
 *
 * With `--kms-url`, the data key lives only wrapped (DIR/encryption-key.wrapped) and is unwrapped
 * by the KMS at boot; if the KMS cannot be reached the server refuses to start (fail-closed).
 * KMS protocol (JSON over HTTP(S)): `POST <url>/v1/encrypt {"plaintext": b64}` →
 * `{"ciphertext": b64}` and `POST <url>/v1/decrypt {"ciphertext": b64}` → `{"plaintext": b64}`.
 */
import type { Transformer } from "@koder/fleet-core"
import { Effect } from "effect"
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto"
import { join } from "node:path"
import { ConfigError, describe } from "../DaemonError.js"
import { readIfExists, writeAtomic } from "../internal/files.js"

/** One named data key. */
export interface Key {
  readonly name: string
  readonly secret: Buffer
}

const prefix = "fleet:enc:aesgcm:v1:"

/** Which resources are sealed: Secrets, as Kubernetes' encryption configuration usually says. */
export const sealed = (resource: { readonly group: string; readonly plural: string }) => resource.group === "" && resource.plural === "secrets"

/** Seal `text` with `key`. */
export const seal = (key: Key, text: string): string => {
  const nonce = randomBytes(12)
  const cipher = createCipheriv("aes-256-gcm", key.secret, nonce)
  const body = Buffer.concat([cipher.update(text, "utf8"), cipher.final()])
  return `${prefix}${key.name}:${Buffer.concat([nonce, body, cipher.getAuthTag()]).toString("base64")}`
}

/** Open a sealed value (or return plaintext written before encryption was enabled). */
export const open = (keys: ReadonlyArray<Key>, stored: string): string => {
  if (!stored.startsWith(prefix)) return stored
  const rest = stored.slice(prefix.length)
  const colon = rest.indexOf(":")
  const name = rest.slice(0, colon)
  const key = keys.find((k) => k.name === name)
  if (key === undefined) throw new Error(`a stored Secret is sealed with key ${JSON.stringify(name)}, which is not configured`)
  const raw = Buffer.from(rest.slice(colon + 1), "base64")
  const decipher = createDecipheriv("aes-256-gcm", key.secret, raw.subarray(0, 12))
  decipher.setAuthTag(raw.subarray(raw.length - 16))
  return Buffer.concat([decipher.update(raw.subarray(12, raw.length - 16)), decipher.final()]).toString("utf8")
}

/** A transformer sealing Secrets with the first key and opening with any. */
export const transformer = (keys: ReadonlyArray<Key>): Transformer.Transformer => ({
  toStore: (resource, text) => (sealed(resource) ? seal(keys[0]!, text) : text),
  fromStore: (resource, text) => (sealed(resource) ? open(keys, text) : text)
})

/** Parse a key file: one `name:base64` per line (32-byte keys), `#` comments; the first seals. */
export const parseKeys = (text: string, file: string): ReadonlyArray<Key> => {
  const keys: Array<Key> = []
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.trim()
    if (line === "" || line.startsWith("#")) continue
    const m = /^([A-Za-z0-9_.-]+):([A-Za-z0-9+/=]+)$/.exec(line)
    const secret = m ? Buffer.from(m[2]!, "base64") : undefined
    if (!m || secret?.length !== 32) throw new Error(`${file}:${i + 1}: expected "name:base64" with a 32-byte key`)
    keys.push({ name: m[1]!, secret })
  }
  if (keys.length === 0) throw new Error(`${file}: no keys`)
  return keys
}

const kmsCall = async (url: string, op: "encrypt" | "decrypt", body: Record<string, string>): Promise<string> => {
  const response = await fetch(`${url.replace(/\/$/, "")}/v1/${op}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: AbortSignal.timeout(10_000)
  })
  if (!response.ok) throw new Error(`KMS ${op} answered ${response.status}`)
  const json = (await response.json()) as Record<string, unknown>
  const value = json[op === "encrypt" ? "ciphertext" : "plaintext"]
  if (typeof value !== "string") throw new Error(`KMS ${op} answered without ${op === "encrypt" ? "ciphertext" : "plaintext"}`)
  return value
}

/** Where the keys come from, in order of precedence. */
export interface Options {
  readonly dataDir: string
  readonly keyFile: string | undefined
  readonly kmsUrl: string | undefined
}

/** Load (or on first start create) the data keys. Fails closed: no key, no server. */
export const loadKeys = (options: Options): Effect.Effect<ReadonlyArray<Key>, ConfigError> =>
  Effect.tryPromise({
    try: async () => {
      if (options.kmsUrl !== undefined) {
        const wrappedFile = join(options.dataDir, "encryption-key.wrapped")
        let wrapped = (await readIfExists(wrappedFile))?.trim()
        if (wrapped === undefined) {
          wrapped = await kmsCall(options.kmsUrl, "encrypt", { plaintext: randomBytes(32).toString("base64") })
          await writeAtomic(wrappedFile, `${wrapped}\n`)
        }
        const secret = Buffer.from(await kmsCall(options.kmsUrl, "decrypt", { ciphertext: wrapped }), "base64")
        if (secret.length !== 32) throw new Error("the KMS unwrapped a data key that is not 32 bytes")
        return [{ name: "kms", secret }]
      }
      const file = options.keyFile ?? join(options.dataDir, "encryption-keys")
      let text = await readIfExists(file)
      if (text === undefined) {
        if (options.keyFile !== undefined) throw new Error(`${file} does not exist`)
        text = `# AES-256-GCM keys for Secrets at rest: "name:base64"; the first seals, all open.\nkey1:${randomBytes(32).toString("base64")}\n`
        await writeAtomic(file, text)
      }
      return parseKeys(text, file)
    },
    catch: (e) => new ConfigError({ message: `encryption at rest: ${describe(e)}` })
  })
