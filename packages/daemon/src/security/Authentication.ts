/**
 * The server's authentication beyond the bootstrap token (DESIGN §10): ServiceAccount tokens
 * (signing key from `--service-account-key-file`, else DIR/service-account.key generated 0600 on
 * first start; the TokenRequest subresource; a `default` account in every namespace, with the
 * `default` and `kube-system` namespaces made at start), node credentials (a fresh one-time join
 * token at every start, printed with the join command; the `fleet.koder.dev` join resources) and,
 * when `--oidc-issuer-url` is set, OIDC ID tokens verified against the issuer's JWKS, fetched
 * through an HTTPS client that trusts `--oidc-ca-file`.
 */
import { NamespaceServiceAccount, NodeCredentials, Oidc, ServiceAccountTokens } from "@koder/fleet-core"
import { Effect, type Scope } from "effect"
import { createHash, createPrivateKey, X509Certificate } from "node:crypto"
import { readFile } from "node:fs/promises"
import { request as httpRequest, type IncomingMessage } from "node:http"
import { request as httpsRequest } from "node:https"
import { join } from "node:path"
import { ConfigError, describe } from "../DaemonError.js"
import { readIfExists, writeAtomic } from "../internal/files.js"
import type { Context, Contribution } from "./Context.js"

const flag = (context: Context, name: string): string | undefined => {
  const v = context.flags[name]
  return typeof v === "string" && v !== "" ? v : undefined
}

const configError = (what: string) => (e: unknown) => new ConfigError({ message: `${what}: ${describe(e)}` })

/** Any PEM private key (PKCS#8, SEC1 "EC PRIVATE KEY", PKCS#1 "RSA PRIVATE KEY") as PKCS#8 PEM. */
const toPkcs8 = (pem: string): string => createPrivateKey(pem).export({ type: "pkcs8", format: "pem" }).toString()

/** The ServiceAccount signing key: the given file, or the data dir's (generated on first start). */
export const signingKey = (dataDir: string, keyFile: string | undefined): Effect.Effect<ServiceAccountTokens.SigningKey, ConfigError> =>
  Effect.gen(function* () {
    const file = keyFile ?? join(dataDir, "service-account.key")
    let pem = yield* Effect.tryPromise({ try: () => readIfExists(file), catch: configError(`reading ${file}`) })
    if (pem === undefined) {
      if (keyFile !== undefined) return yield* Effect.fail(new ConfigError({ message: `--service-account-key-file ${keyFile}: no such file` }))
      const generated = yield* Effect.mapError(ServiceAccountTokens.generateKeyPem, (e) => new ConfigError({ message: e.message }))
      yield* Effect.tryPromise({ try: () => writeAtomic(file, generated, 0o600), catch: configError(`writing ${file}`) })
      pem = generated
    }
    const pkcs8 = yield* Effect.try({ try: () => toPkcs8(pem), catch: configError(`reading the ServiceAccount key ${file}`) })
    return yield* Effect.mapError(ServiceAccountTokens.keyFromPem(pkcs8), (e) => new ConfigError({ message: `${file}: ${e.message}` }))
  })

/** A `fetch` over node:http(s) that trusts `ca` (PEM) for HTTPS, for OIDC discovery and JWKS. */
export const fetchTrusting = (ca: string | undefined): Oidc.Fetch => (url, init) =>
  new Promise<Response>((resolve, reject) => {
    const target = new URL(url)
    const headers: Record<string, string> = {}
    init.headers?.forEach((value, key) => (headers[key] = value))
    const options = { method: init.method ?? "GET", headers, ...(init.signal === undefined ? {} : { signal: init.signal }) }
    const onResponse = (res: IncomingMessage) => {
      const chunks: Array<Buffer> = []
      res.on("data", (c: Buffer) => chunks.push(c))
      res.on("error", reject)
      res.on("end", () => {
        const responseHeaders = new Headers()
        for (const [k, v] of Object.entries(res.headers)) if (typeof v === "string") responseHeaders.set(k, v)
        resolve(new Response(Buffer.concat(chunks), { status: res.statusCode ?? 500, headers: responseHeaders }))
      })
    }
    const req =
      target.protocol === "https:"
        ? httpsRequest(target, { ...options, ...(ca === undefined ? {} : { ca }) }, onResponse)
        : httpRequest(target, options, onResponse)
    req.on("error", reject)
    req.end()
  })

/** The OIDC authenticator of the `--oidc-*` flags, if an issuer is configured. */
const oidc = (context: Context): Effect.Effect<ReadonlyArray<Contribution>, ConfigError> =>
  Effect.gen(function* () {
    const issuerUrl = flag(context, "oidc-issuer-url")
    if (issuerUrl === undefined) return []
    const clientId = flag(context, "oidc-client-id")
    if (clientId === undefined) return yield* Effect.fail(new ConfigError({ message: "--oidc-issuer-url needs --oidc-client-id" }))
    if (!/^https:\/\//.test(issuerUrl) && !/^http:\/\/(127\.0\.0\.1|localhost|\[::1\])[:/]/.test(issuerUrl)) {
      return yield* Effect.fail(new ConfigError({ message: `--oidc-issuer-url ${issuerUrl}: must be https` }))
    }
    const caFile = flag(context, "oidc-ca-file")
    const ca = caFile === undefined ? undefined : yield* Effect.tryPromise({ try: () => readFile(caFile, "utf8"), catch: configError(`reading --oidc-ca-file ${caFile}`) })
    const optional = (name: string, key: string) => {
      const v = flag(context, name)
      return v === undefined ? {} : { [key]: v }
    }
    const authenticator = Oidc.authenticator({
      issuerUrl,
      clientId,
      ...optional("oidc-username-claim", "usernameClaim"),
      ...optional("oidc-username-prefix", "usernamePrefix"),
      ...optional("oidc-groups-claim", "groupsClaim"),
      ...optional("oidc-groups-prefix", "groupsPrefix"),
      fetch: fetchTrusting(ca),
      // A token naming an unknown key refetches the JWKS at most every 5 s (rotation is picked up
      // quickly, yet random key ids cannot hammer the provider).
      jwksCooldownMs: 5000
    })
    return [{ authenticators: [authenticator], banner: [`accepting OIDC tokens from ${issuerUrl} (audience ${clientId})`] }]
  })

/** `sha256:<hex>` of the CA's public key (SubjectPublicKeyInfo), as `kubeadm join --discovery-token-ca-cert-hash`. */
export const caHash = (caPem: string): string => {
  const spki = new X509Certificate(caPem).publicKey.export({ type: "spki", format: "der" })
  return `sha256:${createHash("sha256").update(spki).digest("hex")}`
}

/** Build this component. */
export const make = (context: Context): Effect.Effect<Contribution, ConfigError, Scope.Scope> =>
  Effect.gen(function* () {
    const { store } = context
    const key = yield* signingKey(context.dataDir, flag(context, "service-account-key-file"))
    const config: ServiceAccountTokens.Config = { key, issuer: flag(context, "service-account-issuer") ?? ServiceAccountTokens.defaultIssuer }

    yield* NamespaceServiceAccount.ensure(store, context.region ?? "local").pipe(
      Effect.mapError((e) => new ConfigError({ message: `creating the system namespaces: ${e.message}` }))
    )
    for (const r of NodeCredentials.resources(store)) context.registry.put(r)

    const joinToken = yield* NodeCredentials.createJoinToken(store).pipe(Effect.mapError((e) => new ConfigError({ message: `minting a join token: ${e.message}` })))
    const caPem = context.caPem
    const hash = caPem === undefined ? undefined : yield* Effect.try(() => caHash(caPem)).pipe(Effect.orElseSucceed(() => undefined))
    const joinLine =
      context.hub === true
        ? `join a member (token valid until ${joinToken.expiresAt}; each join still needs your approval): koder-fleet server --join-hub https://${context.address} --hub-token ${joinToken.token}` +
          (hash === undefined ? "" : ` --hub-ca-hash ${hash}`)
        : `join a node (one-time token, valid until ${joinToken.expiresAt}): koder-fleet agent --server https://${context.address} --join-token ${joinToken.token}` +
          (hash === undefined ? "" : ` --ca-hash ${hash}`)

    const fromOidc = yield* oidc(context)
    return {
      authenticators: [
        ServiceAccountTokens.authenticator(config, store),
        NodeCredentials.nodeAuthenticator(store),
        NodeCredentials.joinTokenAuthenticator(store),
        ...fromOidc.flatMap((c) => c.authenticators ?? [])
      ],
      subresources: [ServiceAccountTokens.tokenRequest(config)],
      admission: [NamespaceServiceAccount.plugin(store)],
      banner: [joinLine, ...fromOidc.flatMap((c) => c.banner ?? [])]
    }
  })
