/**
 * A client of the OCI distribution API (what every registry speaks: Docker Hub, GHCR, Harbor,
 * `docker-registry`): manifests by tag or digest, and blobs streamed to a file with their digest
 * and size checked as they arrive.
 *
 * Authentication follows the registry's challenge: a `401` with `WWW-Authenticate: Bearer
 * realm=...,service=...,scope=...` is answered by asking the realm for a token (anonymously, with
 * the credential's username and password as basic auth, or with its OAuth2 refresh token); a
 * `Basic` challenge by sending the credential itself. Tokens are kept until they expire, per
 * endpoint, scope and credential. Redirects (blobs served from object storage) are followed with
 * the credentials dropped when they leave the registry's host.
 *
 * Endpoints come from `RegistryConfig` (k3s's `registries.yaml`): mirrors, plain-HTTP endpoints,
 * a CA bundle per host. Without configuration a registry is reached over HTTPS with the system's
 * CAs; Docker Hub at `registry-1.docker.io`.
 */
import { Runtime } from "@koder/fleet-core"
import { createHash } from "node:crypto"
import { createWriteStream } from "node:fs"
import { rename, rm } from "node:fs/promises"
import { Agent, type Dispatcher, request } from "undici"
import * as RegistryConfig from "./RegistryConfig.js"

/** Where an image lives: its registry host and repository. */
export interface Repository {
  readonly host: string
  readonly path: string
}

/** A manifest as fetched: its bytes, media type and digest (checked). */
export interface Manifest {
  readonly digest: string
  readonly mediaType: string
  readonly body: Buffer
}

/** The manifest types a pull accepts, in the registry's `Accept` header. */
export const manifestTypes = [
  "application/vnd.oci.image.index.v1+json",
  "application/vnd.docker.distribution.manifest.list.v2+json",
  "application/vnd.oci.image.manifest.v1+json",
  "application/vnd.docker.distribution.manifest.v2+json"
] as const

/** The most bytes a manifest or token answer may have (registries cap theirs at 4 MiB). */
export const maxManifestBytes = 4 * 1024 * 1024

const invalid = (message: string) => new Runtime.Invalid({ message })
const unavailable = (message: string) => new Runtime.Unavailable({ message })

/** A challenge of `WWW-Authenticate`: its scheme and parameters. */
export interface Challenge {
  readonly scheme: string
  readonly params: Readonly<Record<string, string>>
}

/** Parse `WWW-Authenticate` (`Bearer realm="...",service="..."`); undefined when absent or unreadable. */
export const parseChallenge = (header: string | undefined): Challenge | undefined => {
  if (header === undefined) return undefined
  const m = /^\s*(\w+)\s*(.*)$/s.exec(header)
  if (m === null) return undefined
  const params: Record<string, string> = {}
  const re = /(\w+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]+))/g
  for (let p = re.exec(m[2]!); p !== null; p = re.exec(m[2]!)) params[p[1]!.toLowerCase()] = (p[2] ?? p[3] ?? "").replace(/\\(.)/g, "$1")
  return { scheme: m[1]!.toLowerCase(), params }
}

const header = (h: Record<string, string | Array<string> | undefined>, name: string): string | undefined => {
  const v = h[name]
  return Array.isArray(v) ? v[0] : v
}

// Let go of a body not read to its end (undici reports the abort as an error: nobody waits for it).
const drop = (body: Dispatcher.ResponseData["body"]) => {
  body.on("error", () => undefined)
  body.destroy()
}

const sha256 = (b: Buffer) => `sha256:${createHash("sha256").update(b).digest("hex")}`

// Read a body up to `max` bytes; more is an error (a registry cannot make the box hold more).
const readBody = async (body: Dispatcher.ResponseData["body"], max: number, what: string): Promise<Buffer> => {
  const chunks: Array<Buffer> = []
  let size = 0
  for await (const chunk of body as AsyncIterable<Buffer>) {
    size += chunk.length
    if (size > max) {
      drop(body)
      throw invalid(`${what}: larger than ${max} bytes`)
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}

const basic = (c: Runtime.PullCredential) => `Basic ${Buffer.from(`${c.username ?? ""}:${c.password ?? ""}`).toString("base64")}`

/** How a registry answered: status, headers, body (a stream the caller consumes or destroys). */
type Answer = Dispatcher.ResponseData

/** One pull's view of the registries: the credentials to try and the tokens obtained. */
export class RegistryClient {
  private readonly tokens = new Map<string, { readonly token: string; readonly expiresAt: number }>()
  private readonly agents = new Map<string, Agent>()

  constructor(
    private readonly config: RegistryConfig.RegistryConfig,
    private readonly options: { readonly timeoutMs?: number } = {}
  ) {}

  /** Close the connections this client opened. */
  async close(): Promise<void> {
    await Promise.all([...this.agents.values()].map((a) => a.close()))
    this.agents.clear()
  }

  private agentFor(host: string): Agent {
    let a = this.agents.get(host)
    if (a === undefined) {
      const tls = RegistryConfig.tlsFor(this.config, host)
      a = new Agent({
        connect: { ...(tls.ca === undefined ? {} : { ca: tls.ca }), rejectUnauthorized: !tls.insecureSkipVerify },
        headersTimeout: this.options.timeoutMs ?? 30_000,
        bodyTimeout: this.options.timeoutMs ?? 30_000
      })
      this.agents.set(host, a)
    }
    return a
  }

  /**
   * GET `path` of the repository's registry, trying its endpoints in order and the credentials
   * in order (then anonymously), answering to auth challenges. The first answer that is not a
   * refusal is returned; a refusal by every credential is `Invalid` (unauthorized).
   */
  private async get(
    repo: Repository,
    path: string,
    accept: string | undefined,
    credentials: ReadonlyArray<Runtime.PullCredential>
  ): Promise<Answer> {
    const endpoints = RegistryConfig.endpointsFor(this.config, repo.host)
    let lastError: unknown
    for (const endpoint of endpoints) {
      const url = `${endpoint.replace(/\/+$/, "")}/v2/${repo.path}/${path}`
      try {
        return await this.getWithAuth(url, repo, accept, credentials)
      } catch (e) {
        // An unauthorized or not-found answer is the registry's word: no other endpoint is asked.
        if (e instanceof Runtime.Invalid || e instanceof Runtime.NotFound) throw e
        lastError = e
      }
    }
    throw lastError instanceof Runtime.Unavailable ? lastError : unavailable(String(lastError))
  }

  private async getWithAuth(url: string, repo: Repository, accept: string | undefined, credentials: ReadonlyArray<Runtime.PullCredential>): Promise<Answer> {
    const scope = `repository:${repo.path}:pull`
    const attempts: Array<Runtime.PullCredential | undefined> = [...credentials, ...RegistryConfig.authFor(this.config, repo.host), undefined]
    let refused = ""
    for (const [index, credential] of attempts.entries()) {
      const key = `${new URL(url).host}|${scope}|${index}`
      const cached = this.tokens.get(key)
      let auth: string | undefined = cached !== undefined && cached.expiresAt > Date.now() ? `Bearer ${cached.token}` : undefined
      if (auth === undefined && credential?.registryToken !== undefined) auth = `Bearer ${credential.registryToken}`
      let answer = await this.fetch(url, accept, auth)
      if (answer.statusCode === 401) {
        const challenge = parseChallenge(header(answer.headers, "www-authenticate"))
        drop(answer.body)
        if (challenge?.scheme === "bearer" && challenge.params["realm"] !== undefined) {
          const token = await this.token(challenge, scope, credential)
          if (token !== undefined) {
            this.tokens.set(key, { token: token.token, expiresAt: Date.now() + token.expiresInSeconds * 1000 - 5_000 })
            answer = await this.fetch(url, accept, `Bearer ${token.token}`)
          }
        } else if (challenge?.scheme === "basic" && credential?.username !== undefined) {
          answer = await this.fetch(url, accept, basic(credential))
        }
      }
      if (answer.statusCode !== 401 && answer.statusCode !== 403) return answer
      refused = (await readBody(answer.body, 64 * 1024, "error").catch(() => Buffer.alloc(0))).toString("utf8")
    }
    throw invalid(`unauthorized: ${describeErrors(refused) || "authentication required"}`)
  }

  /** Ask a token realm for a pull token of `scope`; undefined when it refuses this credential. */
  private async token(challenge: Challenge, scope: string, credential: Runtime.PullCredential | undefined) {
    const realm = new URL(challenge.params["realm"]!)
    const service = challenge.params["service"]
    let answer: Answer
    if (credential?.identityToken !== undefined) {
      const form = new URLSearchParams({ grant_type: "refresh_token", refresh_token: credential.identityToken, scope, client_id: "koder-fleet" })
      if (service !== undefined) form.set("service", service)
      answer = await request(realm, {
        method: "POST",
        dispatcher: this.agentFor(realm.host),
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: form.toString()
      }).catch((e: unknown) => {
        throw unavailable(`token ${realm.origin}: ${e instanceof Error ? e.message : String(e)}`)
      })
    } else {
      if (service !== undefined) realm.searchParams.set("service", service)
      realm.searchParams.set("scope", scope)
      answer = await request(realm, {
        method: "GET",
        dispatcher: this.agentFor(realm.host),
        headers: credential?.username !== undefined ? { authorization: basic(credential) } : {}
      }).catch((e: unknown) => {
        throw unavailable(`token ${realm.origin}: ${e instanceof Error ? e.message : String(e)}`)
      })
    }
    const body = await readBody(answer.body, maxManifestBytes, "token answer")
    if (answer.statusCode === 401 || answer.statusCode === 403) return undefined
    if (answer.statusCode !== 200) throw unavailable(`token ${realm.origin}: HTTP ${answer.statusCode}`)
    try {
      const t = JSON.parse(body.toString("utf8")) as { token?: string; access_token?: string; expires_in?: number }
      const token = t.token ?? t.access_token
      if (typeof token !== "string" || token === "") throw new Error("no token")
      return { token, expiresInSeconds: typeof t.expires_in === "number" && t.expires_in > 0 ? t.expires_in : 60 }
    } catch {
      throw unavailable(`token ${realm.origin}: the answer holds no token`)
    }
  }

  // One GET, following redirects (at most 5); the Authorization header stays on the first host.
  private async fetch(url: string, accept: string | undefined, authorization: string | undefined): Promise<Answer> {
    let target = new URL(url)
    const origin = target.host
    for (let hop = 0; hop <= 5; hop++) {
      const headers: Record<string, string> = { "user-agent": "koder-fleet" }
      if (accept !== undefined) headers["accept"] = accept
      if (authorization !== undefined && target.host === origin) headers["authorization"] = authorization
      let answer: Answer
      try {
        answer = await request(target, { method: "GET", headers, dispatcher: this.agentFor(target.host) })
      } catch (e) {
        throw unavailable(`${target.origin}: ${e instanceof Error ? e.message : String(e)}`)
      }
      const location = header(answer.headers, "location")
      if (answer.statusCode >= 300 && answer.statusCode < 400 && location !== undefined) {
        drop(answer.body)
        target = new URL(location, target)
        continue
      }
      return answer
    }
    throw unavailable(`${url}: too many redirects`)
  }

  /**
   * The manifest `reference` (a tag or `sha256:` digest) of a repository. Its bytes must hash to
   * the digest it was asked by, and to the registry's `Docker-Content-Digest` when it sends one.
   */
  async manifest(repo: Repository, reference: string, credentials: ReadonlyArray<Runtime.PullCredential>): Promise<Manifest> {
    const answer = await this.get(repo, `manifests/${reference}`, manifestTypes.join(", "), credentials)
    const name = `${repo.host}/${repo.path}:${reference}`
    if (answer.statusCode === 404) {
      const body = await readBody(answer.body, 64 * 1024, "error").catch(() => Buffer.alloc(0))
      throw new Runtime.NotFound({ kind: "image", id: name, message: `${name}: ${describeErrors(body.toString("utf8")) || "manifest unknown"}` })
    }
    if (answer.statusCode !== 200) {
      const body = await readBody(answer.body, 64 * 1024, "error").catch(() => Buffer.alloc(0))
      throw unavailable(`${name}: HTTP ${answer.statusCode} ${describeErrors(body.toString("utf8"))}`.trim())
    }
    const body = await readBody(answer.body, maxManifestBytes, `manifest ${name}`)
    const digest = sha256(body)
    if (reference.startsWith("sha256:") && reference !== digest) throw invalid(`manifest ${name}: its content is ${digest}, not the digest asked for`)
    const sent = header(answer.headers, "docker-content-digest")
    if (sent !== undefined && sent.startsWith("sha256:") && sent !== digest) throw invalid(`manifest ${name}: its content is ${digest}, the registry says ${sent}`)
    let mediaType = (header(answer.headers, "content-type") ?? "").split(";")[0]!.trim()
    try {
      const parsed = JSON.parse(body.toString("utf8")) as { mediaType?: string }
      if (typeof parsed.mediaType === "string") mediaType = parsed.mediaType
    } catch {
      throw invalid(`manifest ${name}: not JSON`)
    }
    return { digest, mediaType, body }
  }

  /**
   * Stream blob `digest` (`size` bytes, as its descriptor says) into `file`: written beside it
   * and renamed once its sha256 and size match, so a half-fetched or forged blob never lands.
   */
  async blob(repo: Repository, digest: string, size: number, file: string, credentials: ReadonlyArray<Runtime.PullCredential>): Promise<void> {
    const answer = await this.get(repo, `blobs/${digest}`, undefined, credentials)
    const name = `${repo.host}/${repo.path}@${digest}`
    if (answer.statusCode === 404) {
      drop(answer.body)
      throw new Runtime.NotFound({ kind: "image", id: name, message: `blob ${name}: blob unknown` })
    }
    if (answer.statusCode !== 200) {
      drop(answer.body)
      throw unavailable(`blob ${name}: HTTP ${answer.statusCode}`)
    }
    const tmp = `${file}.${process.pid}.${Math.random().toString(16).slice(2)}.part`
    const hash = createHash("sha256")
    let got = 0
    try {
      const out = createWriteStream(tmp, { mode: 0o600 })
      try {
        for await (const chunk of answer.body as AsyncIterable<Buffer>) {
          got += chunk.length
          if (got > size) throw invalid(`blob ${name}: more than the ${size} bytes its descriptor says`)
          hash.update(chunk)
          if (!out.write(chunk)) await new Promise<void>((resolve) => out.once("drain", resolve))
        }
      } finally {
        await new Promise<void>((resolve, reject) => out.end((e?: Error | null) => (e ? reject(e) : resolve())))
      }
      if (got !== size) throw invalid(`blob ${name}: ${got} bytes, its descriptor says ${size}`)
      const actual = `sha256:${hash.digest("hex")}`
      if (actual !== digest) throw invalid(`blob ${name}: its content is ${actual}, not the digest of its descriptor`)
      await rename(tmp, file)
    } catch (e) {
      drop(answer.body)
      await rm(tmp, { force: true })
      if (e instanceof Runtime.Invalid || e instanceof Runtime.Unavailable) throw e
      throw unavailable(`blob ${name}: ${e instanceof Error ? e.message : String(e)}`)
    }
  }
}

// The messages of a registry's `{"errors":[{code,message}]}` answer.
const describeErrors = (body: string): string => {
  try {
    const parsed = JSON.parse(body) as { errors?: Array<{ code?: string; message?: string }> }
    return (parsed.errors ?? []).map((e) => [e.code, e.message].filter(Boolean).join(": ")).join("; ")
  } catch {
    return body.slice(0, 200).trim()
  }
}
