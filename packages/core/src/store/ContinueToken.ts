/**
 * `continue` tokens for paged lists. A token pins the revision of the first page and the last
 * key returned, so every page of one list reads the same snapshot (Kubernetes semantics). It is
 * opaque to clients and identical across backends, so a token survives a server switch-over.
 */
import { Either } from "effect"
import { Expired } from "./StoreError.js"

/** What a continue token carries. */
export interface ContinueToken {
  /** The revision the list is pinned to. */
  readonly revision: number
  /** The last key returned; the next page starts strictly after it. */
  readonly after: string
}

const encoder = new TextEncoder()
const decoder = new TextDecoder("utf-8", { fatal: true })

const toBase64Url = (bytes: Uint8Array): string => {
  let binary = ""
  for (let i = 0; i < bytes.length; i++) binary += String.fromCharCode(bytes[i]!)
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "")
}

const fromBase64Url = (text: string): Uint8Array => {
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/"))
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return bytes
}

/** Encode a token. */
export const encode = (token: ContinueToken): string =>
  toBase64Url(encoder.encode(JSON.stringify({ v: 1, rv: token.revision, k: token.after })))

/** Decode a token, failing with `Expired` when it is not one of ours. */
export const decode = (text: string): Either.Either<ContinueToken, Expired> => {
  try {
    const parsed: unknown = JSON.parse(decoder.decode(fromBase64Url(text)))
    if (typeof parsed === "object" && parsed !== null) {
      const { v, rv, k } = parsed as Record<string, unknown>
      if (v === 1 && typeof rv === "number" && Number.isSafeInteger(rv) && rv >= 0 && typeof k === "string") {
        return Either.right({ revision: rv, after: k })
      }
    }
  } catch {
    // fall through: any decoding failure means the token is not ours
  }
  return Either.left(new Expired({ reason: "malformed continue token" }))
}

/** The failure for a token whose pinned revision has been compacted away. */
export const expired = (revision: number, compactRevision: number): Expired =>
  new Expired({
    reason: `the list was pinned to revision ${revision}, which has been compacted (oldest available: ${compactRevision}); restart the list without a continue token`
  })
