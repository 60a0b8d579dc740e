/**
 * How the box reaches registries: k3s's `registries.yaml`, so a k3s user's file works unchanged.
 *
 *   mirrors:                        # endpoints tried in order, then the registry itself
 *     docker.io:
 *       endpoint: ["https://mirror.internal"]
 *     "10.0.0.5:5000":
 *       endpoint: ["http://10.0.0.5:5000"]   # plain HTTP only where a file says so
 *   configs:
 *     "10.0.0.5:5000":
 *       auth: { username: u, password: p }   # or auth: <base64 u:p>, identity_token
 *       tls: { ca_file: /etc/ssl/reg.pem, insecure_skip_verify: false }
 *
 * A mirror key `"*"` applies to every registry. Without a file every registry is HTTPS with the
 * system's CAs, Docker Hub at `registry-1.docker.io`. A pod's own pull secrets are tried before
 * a file's `auth`.
 */
import type { Runtime } from "@koder/fleet-core"
import { readFileSync } from "node:fs"
import { parse } from "yaml"

/** One registry's TLS settings. */
export interface Tls {
  readonly ca?: string
  readonly insecureSkipVerify: boolean
}

/** The parsed file. */
export interface RegistryConfig {
  readonly mirrors: Readonly<Record<string, ReadonlyArray<string>>>
  readonly configs: Readonly<Record<string, { readonly auth?: Runtime.PullCredential; readonly tls: Tls }>>
}

/** No file: defaults only. */
export const empty: RegistryConfig = { mirrors: {}, configs: {} }

const record = (v: unknown): Record<string, unknown> => (v !== null && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : {})
const str = (v: unknown): string | undefined => (typeof v === "string" && v !== "" ? v : undefined)

/** Parse a `registries.yaml` text; a string is what is wrong with it. */
export const parseText = (text: string, readFile: (path: string) => string = (p) => readFileSync(p, "utf8")): RegistryConfig | string => {
  let doc: unknown
  try {
    doc = parse(text)
  } catch (e) {
    return `not YAML: ${e instanceof Error ? e.message : String(e)}`
  }
  const mirrors: Record<string, ReadonlyArray<string>> = {}
  for (const [host, m] of Object.entries(record(record(doc)["mirrors"]))) {
    const endpoints = record(m)["endpoint"]
    if (!Array.isArray(endpoints) || endpoints.some((e) => typeof e !== "string" || !/^https?:\/\//.test(e)))
      return `mirrors.${host}.endpoint: a list of http:// or https:// URLs`
    mirrors[host] = endpoints as Array<string>
  }
  const configs: Record<string, { auth?: Runtime.PullCredential; tls: Tls }> = {}
  for (const [host, c] of Object.entries(record(record(doc)["configs"]))) {
    const auth = record(record(c)["auth"])
    const tls = record(record(c)["tls"])
    let username = str(auth["username"])
    let password = str(auth["password"])
    const joined = str(auth["auth"])
    if (joined !== undefined) {
      const decoded = Buffer.from(joined, "base64").toString("utf8")
      const colon = decoded.indexOf(":")
      if (colon < 1) return `configs.${host}.auth.auth: base64 of username:password`
      username = decoded.slice(0, colon)
      password = decoded.slice(colon + 1)
    }
    const identityToken = str(auth["identity_token"])
    const credential: Runtime.PullCredential = {
      ...(username === undefined ? {} : { username }),
      ...(password === undefined ? {} : { password }),
      ...(identityToken === undefined ? {} : { identityToken })
    }
    let ca: string | undefined
    const caFile = str(tls["ca_file"])
    if (caFile !== undefined) {
      try {
        ca = readFile(caFile)
      } catch {
        return `configs.${host}.tls.ca_file: ${caFile} cannot be read`
      }
    }
    configs[host] = {
      ...(Object.keys(credential).length === 0 ? {} : { auth: credential }),
      tls: { ...(ca === undefined ? {} : { ca }), insecureSkipVerify: tls["insecure_skip_verify"] === true }
    }
  }
  return { mirrors, configs }
}

/** Read a `registries.yaml`; a missing file is no configuration, an unreadable one an error. */
export const load = (path: string | undefined): RegistryConfig => {
  if (path === undefined) return empty
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === "ENOENT") return empty
    throw new Error(`${path}: ${e instanceof Error ? e.message : String(e)}`)
  }
  const parsed = parseText(text)
  if (typeof parsed === "string") throw new Error(`${path}: ${parsed}`)
  return parsed
}

/** The registry's own endpoint: Docker Hub's API host, or HTTPS on the host. */
export const defaultEndpoint = (host: string): string => (host === "docker.io" ? "https://registry-1.docker.io" : `https://${host}`)

/** The endpoints to try for `host`: its mirrors (or `*`'s), then the registry itself. */
export const endpointsFor = (config: RegistryConfig, host: string): ReadonlyArray<string> => {
  const mirrors = config.mirrors[host] ?? config.mirrors["*"] ?? []
  const own = defaultEndpoint(host)
  return [...mirrors, ...(mirrors.includes(own) ? [] : [own])]
}

/** The TLS settings for `host` (a registry or mirror host, with its port). */
export const tlsFor = (config: RegistryConfig, host: string): Tls => config.configs[host]?.tls ?? { insecureSkipVerify: false }

/** The file's credentials for `host`, tried after a pod's own. */
export const authFor = (config: RegistryConfig, host: string): ReadonlyArray<Runtime.PullCredential> => {
  const auth = config.configs[host]?.auth
  return auth === undefined ? [] : [auth]
}
