/**
 * Authentication: who is calling. An authenticator reads the request's credentials and answers
 * with a user, "not mine" (so the next one may try), or a 401. This module holds the static
 * bootstrap token (stored only as a SHA-256 hash, compared in constant time); ServiceAccount,
 * OIDC and node credentials plug in as further authenticators (`authn/`).
 */
import { Effect, Option } from "effect"
import * as Status from "../model/Status.js"
import * as ApiError from "./ApiError.js"
import type { UserInfo } from "./Http.js"

/** Reads credentials from request headers: a user, `None` (not this authenticator's), or 401. */
export type Authenticator = (headers: Readonly<Record<string, string | undefined>>) => Effect.Effect<Option.Option<UserInfo>, ApiError.ApiError>

/** The bearer token of an `Authorization` header, if any. */
export const bearer = (headers: Readonly<Record<string, string | undefined>>): string | undefined => {
  const h = headers["authorization"]
  if (h === undefined) return undefined
  const m = /^Bearer\s+(\S+)\s*$/i.exec(h)
  return m ? m[1] : undefined
}

const hex = (bytes: ArrayBuffer) => Array.from(new Uint8Array(bytes), (b) => b.toString(16).padStart(2, "0")).join("")

/** The stored form of a token: `sha256:<hex>`. */
export const hashToken = (token: string): Effect.Effect<string> =>
  Effect.promise(() => crypto.subtle.digest("SHA-256", new TextEncoder().encode(token))).pipe(Effect.map((d) => `sha256:${hex(d)}`))

/** Compare two strings without an early exit, so timing does not reveal how much matched. */
export const constantTimeEqual = (a: string, b: string): boolean => {
  let diff = a.length ^ b.length
  const n = Math.max(a.length, b.length)
  for (let i = 0; i < n; i++) diff |= (a.charCodeAt(i % Math.max(1, a.length)) ^ b.charCodeAt(i % Math.max(1, b.length))) | 0
  return diff === 0
}

/** A static token: any request bearing it is `user`. `hash` is `hashToken(token)`. */
export const staticToken = (hash: string, user: UserInfo): Authenticator => {
  // The accepted token, once seen: hashing every request costs more than the rest of a GET.
  let accepted: string | undefined
  return (headers) =>
    Effect.gen(function* () {
      const token = bearer(headers)
      if (token === undefined) return Option.none()
      if (accepted !== undefined && constantTimeEqual(token, accepted)) return Option.some(user)
      const presented = yield* hashToken(token)
      if (!constantTimeEqual(presented, hash)) return Option.none()
      accepted = token
      return Option.some(user)
    })
}

/** The bootstrap administrator, as Kubernetes names its super-user group. */
export const bootstrapAdmin: UserInfo = { name: "fleet:bootstrap-admin", uid: "bootstrap-admin", groups: ["system:masters", "system:authenticated"] }

/** Try authenticators in order; 401 if none accepts the request. */
export const chain = (authenticators: ReadonlyArray<Authenticator>): ((headers: Readonly<Record<string, string | undefined>>) => Effect.Effect<UserInfo, ApiError.ApiError>) => (headers) =>
  Effect.gen(function* () {
    for (const a of authenticators) {
      const user = yield* a(headers)
      if (Option.isSome(user)) return user.value
    }
    return yield* Effect.fail(ApiError.of(Status.unauthorized()))
  })
