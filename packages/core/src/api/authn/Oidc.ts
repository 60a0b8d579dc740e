/**
 * OIDC ID tokens from a configured identity provider (Koder ID), as kube-apiserver's `--oidc-*`
 * flags define them: the token's `iss` must be the issuer URL, its `aud` must contain the client
 * id, it must be within `nbf`..`exp`, and its signature must verify with a key from the issuer's
 * JWKS (found through `<issuer>/.well-known/openid-configuration`). jose's remote key set caches
 * the keys and refetches them when a token names a key it has not seen (rotation).
 *
 *   Bearer JWT ─▶ iss ours? ─▶ discovery (once) ─▶ JWKS (cached) ─▶ verify ─▶ user from claims
 */
import { Effect, Either, Option } from "effect"
import * as jose from "jose"
import type { Authenticator } from "../Authn.js"
import { bearer } from "../Authn.js"
import type { UserInfo } from "../Http.js"

/** A `fetch` as jose and discovery use it (the daemon passes one that trusts `--oidc-ca-file`). */
export type Fetch = (url: string, init: { readonly headers?: Headers; readonly method?: string; readonly redirect?: "manual"; readonly signal?: AbortSignal }) => Promise<Response>

/** The provider and how its claims map to a user. */
export interface Config {
  /** `--oidc-issuer-url`: must equal the tokens' `iss` and the discovery document's `issuer`. */
  readonly issuerUrl: string
  /** `--oidc-client-id`: must be in the tokens' `aud`. */
  readonly clientId: string
  /** Claim holding the user name (default `sub`). */
  readonly usernameClaim?: string
  /** Prefix of user names; default `<issuer>#` unless the claim is `email`; `-` for none. */
  readonly usernamePrefix?: string
  /** Claim holding the groups (default `groups`); a string or a list of strings. */
  readonly groupsClaim?: string
  /** Prefix of group names. */
  readonly groupsPrefix?: string
  /** HTTP client for discovery and the JWKS (default: the global fetch). */
  readonly fetch?: Fetch
  /** Minimum time between JWKS refetches when a token names an unknown key (jose default 30 s). */
  readonly jwksCooldownMs?: number
  /** How long fetched keys are trusted before a refetch (jose default 10 min). */
  readonly jwksMaxAgeMs?: number
}

/** The user name prefix in effect for `config`, as kube-apiserver defaults it. */
export const usernamePrefix = (config: Config): string => {
  const claim = config.usernameClaim ?? "sub"
  if (config.usernamePrefix === "-") return ""
  if (config.usernamePrefix !== undefined) return config.usernamePrefix
  return claim === "email" ? "" : `${config.issuerUrl}#`
}

/** The user of verified claims, or `None` when the claims do not name one. */
export const userFromClaims = (config: Config, claims: jose.JWTPayload): Option.Option<UserInfo> => {
  const claim = config.usernameClaim ?? "sub"
  const raw = claims[claim]
  if (typeof raw !== "string" || raw === "") return Option.none()
  // An unverified email is not an identity (kube-apiserver refuses it too).
  if (claim === "email" && claims["email_verified"] !== undefined && claims["email_verified"] !== true) return Option.none()
  const groupsRaw = claims[config.groupsClaim ?? "groups"]
  const groups = typeof groupsRaw === "string" ? [groupsRaw] : Array.isArray(groupsRaw) ? groupsRaw.filter((g): g is string => typeof g === "string") : []
  const prefix = config.groupsPrefix ?? ""
  return Option.some({
    name: `${usernamePrefix(config)}${raw}`,
    uid: typeof claims.sub === "string" ? claims.sub : raw,
    groups: [...groups.map((g) => `${prefix}${g}`), "system:authenticated"]
  })
}

const unverifiedIssuer = (token: string): string | undefined => {
  try {
    const iss = jose.decodeJwt(token).iss
    return typeof iss === "string" ? iss : undefined
  } catch {
    return undefined
  }
}

/** Find the JWKS URL of the issuer; the document must name the same issuer. */
const discover = (config: Config, fetchImpl: Fetch): Promise<URL> =>
  fetchImpl(`${config.issuerUrl.replace(/\/$/, "")}/.well-known/openid-configuration`, { method: "GET", headers: new Headers({ accept: "application/json" }) }).then(
    async (response) => {
      if (response.status !== 200) throw new Error(`OIDC discovery answered ${response.status}`)
      const doc = (await response.json()) as { issuer?: unknown; jwks_uri?: unknown }
      if (doc.issuer !== config.issuerUrl) throw new Error(`OIDC discovery names issuer ${String(doc.issuer)}, expected ${config.issuerUrl}`)
      if (typeof doc.jwks_uri !== "string") throw new Error("OIDC discovery has no jwks_uri")
      return new URL(doc.jwks_uri)
    }
  )

/**
 * An authenticator of the provider's ID tokens. Discovery happens on the first token (and again
 * after a failure), so the server starts even while the provider is down.
 */
export const authenticator = (config: Config): Authenticator => {
  const fetchImpl: Fetch = config.fetch ?? ((url, init) => fetch(url, init))
  let keys: Promise<ReturnType<typeof jose.createRemoteJWKSet>> | undefined
  const keySet = () => {
    if (keys === undefined) {
      keys = discover(config, fetchImpl).then((url) =>
        jose.createRemoteJWKSet(url, {
          [jose.customFetch]: fetchImpl as jose.FetchImplementation,
          ...(config.jwksCooldownMs === undefined ? {} : { cooldownDuration: config.jwksCooldownMs }),
          ...(config.jwksMaxAgeMs === undefined ? {} : { cacheMaxAge: config.jwksMaxAgeMs })
        })
      )
      keys.catch(() => (keys = undefined))
    }
    return keys
  }
  return (headers) =>
    Effect.gen(function* () {
      const token = bearer(headers)
      if (token === undefined || unverifiedIssuer(token) !== config.issuerUrl) return Option.none()
      const verified = yield* Effect.either(
        Effect.tryPromise(async () =>
          jose.jwtVerify(token, await keySet(), {
            issuer: config.issuerUrl,
            audience: config.clientId,
            requiredClaims: ["exp"]
          })
        )
      )
      if (Either.isLeft(verified)) return Option.none()
      return userFromClaims(config, verified.right.payload)
    })
}
