/**
 * Image pulls for a container start (the kubelet's image manager): the pull policy, the
 * credentials of the pod's `imagePullSecrets` that match the image's registry, the backoff after
 * a failed pull (`ErrImagePull`, then `ImagePullBackOff` from 10 s doubling to 5 min), and the
 * Events a user reads in `kubectl describe pod` (Pulling, Pulled, Failed, BackOff).
 *
 * The decisions (policy, registry, credentials, backoff) are pure; `ensure` is the one effect.
 */
import { Clock, Effect } from "effect"
import type * as Config from "../model/Config.js"
import type * as Pod from "../model/Pod.js"
import type * as Runtime from "../runtime/Runtime.js"
import { decodeBase64 } from "./ContainerEnv.js"
import type * as PodStates from "./PodStates.js"
import type * as PodSync from "./PodSync.js"

/** The pull policy of a container: its own, or Kubernetes' default for its image. */
export const policyOf = (container: Pod.Container): Runtime.PullRequest["policy"] => {
  const p = container.imagePullPolicy
  if (p === "Always" || p === "IfNotPresent" || p === "Never") return p
  return defaultPolicy(container.image ?? "")
}

/** `Always` for `:latest` or an untagged, unpinned image; `IfNotPresent` otherwise (as the API server defaults it). */
export const defaultPolicy = (image: string): Runtime.PullRequest["policy"] => {
  if (image.includes("@")) return "IfNotPresent"
  const slash = image.lastIndexOf("/")
  const colon = image.lastIndexOf(":")
  return colon > slash && image.slice(colon + 1) !== "latest" ? "IfNotPresent" : "Always"
}

/** Where an image lives: its registry host (`docker.io` for Docker Hub) and repository path. */
export interface Location {
  readonly host: string
  readonly path: string
}

/**
 * The registry and repository of a reference, as Docker normalizes it: a first component with a
 * `.` or `:`, or `localhost`, is a host; otherwise the image is on Docker Hub, where a one-part
 * name is under `library/`.
 */
export const locationOf = (image: string): Location => {
  const name = image.split("@")[0]!
  const slash = name.lastIndexOf("/")
  const colon = name.lastIndexOf(":")
  const repo = colon > slash ? name.slice(0, colon) : name
  const first = repo.indexOf("/")
  const head = first < 0 ? "" : repo.slice(0, first)
  if (first >= 0 && (head.includes(".") || head.includes(":") || head === "localhost")) return { host: head, path: repo.slice(first + 1) }
  return { host: "docker.io", path: first < 0 ? `library/${repo}` : repo }
}

// A docker config key as a host and path prefix: `https://index.docker.io/v1/` is Docker Hub.
const keyLocation = (key: string): Location => {
  const bare = key.replace(/^[a-z]+:\/\//i, "").replace(/\/+$/, "").replace(/\/v[12]$/, "")
  const slash = bare.indexOf("/")
  const host = (slash < 0 ? bare : bare.slice(0, slash)).toLowerCase()
  const path = slash < 0 ? "" : bare.slice(slash + 1)
  const hub = host === "index.docker.io" || host === "registry-1.docker.io" || host === "registry.hub.docker.com"
  return { host: hub ? "docker.io" : host, path }
}

// `*.example.com` matches one label, as the kubelet's credential provider matches them.
const hostMatches = (pattern: string, host: string): boolean => {
  if (!pattern.includes("*")) return pattern === host.toLowerCase()
  const p = pattern.split(".")
  const h = host.toLowerCase().split(".")
  return p.length === h.length && p.every((part, i) => part === "*" || part === h[i])
}

interface DockerAuth {
  readonly auth?: string
  readonly username?: string
  readonly password?: string
  readonly identitytoken?: string
  readonly registrytoken?: string
}

// The `auths` map of a dockerconfigjson or legacy dockercfg Secret; malformed ones give nothing.
const authsOf = (secret: Config.Secret): Record<string, DockerAuth> => {
  const data = secret.data ?? {}
  try {
    if (typeof data[".dockerconfigjson"] === "string") {
      const parsed = JSON.parse(decodeBase64(data[".dockerconfigjson"])) as { auths?: Record<string, DockerAuth> }
      return parsed.auths ?? {}
    }
    if (typeof data[".dockercfg"] === "string") return JSON.parse(decodeBase64(data[".dockercfg"])) as Record<string, DockerAuth>
  } catch {
    return {}
  }
  return {}
}

const credentialOf = (a: DockerAuth): Runtime.PullCredential | undefined => {
  let username = a.username
  let password = a.password
  if (typeof a.auth === "string" && a.auth !== "") {
    const decoded = decodeBase64(a.auth)
    const colon = decoded.indexOf(":")
    if (colon > 0) {
      username = decoded.slice(0, colon)
      password = decoded.slice(colon + 1)
    }
  }
  const c: Runtime.PullCredential = {
    ...(typeof username === "string" && username !== "" ? { username } : {}),
    ...(typeof password === "string" ? { password } : {}),
    ...(typeof a.identitytoken === "string" && a.identitytoken !== "" ? { identityToken: a.identitytoken } : {}),
    ...(typeof a.registrytoken === "string" && a.registrytoken !== "" ? { registryToken: a.registrytoken } : {})
  }
  return Object.keys(c).length === 0 ? undefined : c
}

/**
 * The credentials for `image` among `secrets` (the pod's `imagePullSecrets`, in order): every
 * entry whose registry matches the image's host and whose path is a prefix of its repository,
 * the most specific first, as the kubelet tries them.
 */
export const credentialsFor = (image: string, secrets: ReadonlyArray<Config.Secret>): ReadonlyArray<Runtime.PullCredential> => {
  const at = locationOf(image)
  const found: Array<{ readonly specificity: number; readonly order: number; readonly credential: Runtime.PullCredential }> = []
  for (const secret of secrets)
    for (const [key, auth] of Object.entries(authsOf(secret))) {
      const k = keyLocation(key)
      if (!hostMatches(k.host, at.host)) continue
      if (k.path !== "" && at.path !== k.path && !at.path.startsWith(`${k.path}/`)) continue
      const credential = credentialOf(auth)
      if (credential !== undefined) found.push({ specificity: k.host.length + k.path.length, order: found.length, credential })
    }
  return found.sort((a, b) => b.specificity - a.specificity || a.order - b.order).map((f) => f.credential)
}

/** A container's failed pulls: how many in a row, and when the next may start. */
export interface Backoff {
  readonly image: string
  readonly failures: number
  readonly retryAtMs: number
  readonly message: string
}

/** The kubelet's image backoff: 10 s, doubling, at most 5 minutes. */
export const backoffDelayMs = (failures: number): number => Math.min(10_000 * 2 ** Math.max(0, failures - 1), 300_000)

/** A container whose image is ready: the image, when the runtime runs images. */
export interface Ready {
  readonly image?: Runtime.Image
}

/** What `ensure` needs. */
export interface Deps {
  readonly runtime: Runtime.RuntimeService
  readonly emit: PodStates.Emit
}

const waitingOf = (reason: string, message: string): PodSync.Waiting => ({ reason, message })

const seconds = (ms: number) => `${(ms / 1000).toFixed(3).replace(/\.?0+$/, "")}s`

/**
 * Make `container`'s image present as its policy says, before its attempt is created. Answers
 * what to run (the image, with its config to merge into the spec; none on a runtime that runs
 * commands rather than images), or undefined when the container must wait:
 * then `state.waiting` says why (ErrImagePull, ImagePullBackOff, ErrImageNeverPull,
 * InvalidImageName), as the kubelet reports it.
 */
export const ensure = (
  deps: Deps,
  pod: Pod.Pod,
  state: PodStates.PodState,
  container: Pod.Container,
  secrets: ReadonlyArray<Config.Secret>
): Effect.Effect<Ready | undefined, Runtime.Unavailable> =>
  Effect.gen(function* () {
    const image = container.image ?? ""
    const name = container.name
    const wait = (reason: string, message: string) => Effect.sync(() => void state.waiting.set(name, waitingOf(reason, message)))
    if (image === "") {
      yield* wait("InvalidImageName", `container "${name}" has no image`)
      return undefined
    }
    const now = yield* Clock.currentTimeMillis
    const previous = state.imagePulls.get(name)
    const backoff = previous?.image === image ? previous : undefined
    if (backoff !== undefined && now < backoff.retryAtMs) {
      if (state.waiting.get(name)?.reason !== "ImagePullBackOff") {
        yield* deps.emit(pod, "Normal", "BackOff", `Back-off pulling image "${image}"`)
        yield* deps.emit(pod, "Warning", "Failed", "Error: ImagePullBackOff")
      }
      yield* wait("ImagePullBackOff", `Back-off pulling image "${image}": ${backoff.message}`)
      return undefined
    }
    const policy = policyOf(container)
    const started = now
    const credentials = credentialsFor(image, secrets)
    // "Pulling" only when the registry will be asked; a held image under IfNotPresent is not pulled.
    const held = policy !== "IfNotPresent" ? undefined : (yield* deps.runtime.images.list).find((i) => holds(i, image))
    if (held === undefined && policy !== "Never") yield* deps.emit(pod, "Normal", "Pulling", `Pulling image "${image}"`)
    const result = yield* Effect.either(
      deps.runtime.images.pull({ image, policy, ...(credentials.length > 0 ? { credentials: [...credentials] } : {}) })
    )
    if (result._tag === "Right") {
      state.imagePulls.delete(name)
      const r = result.right
      const elapsed = (yield* Clock.currentTimeMillis) - started
      if (!r.pulled) yield* deps.emit(pod, "Normal", "Pulled", `Container image "${image}" already present on machine`)
      else
        yield* deps.emit(
          pod,
          "Normal",
          "Pulled",
          `Successfully pulled image "${image}" in ${seconds(elapsed)}. Image size: ${r.image.sizeBytes} bytes.${r.fetchedBytes === 0 ? " Every layer was cached." : ""}`
        )
      return { image: r.image }
    }
    const e = result.left
    if (e._tag === "RuntimeUnsupported") {
      // A runtime that runs commands, not images (the process driver): nothing to pull.
      return {}
    }
    if (e._tag === "RuntimeNotFound" && policy === "Never") {
      const message = `Container image "${image}" is not present with pull policy of Never`
      yield* deps.emit(pod, "Warning", "ErrImageNeverPull", message)
      yield* wait("ErrImageNeverPull", message)
      return undefined
    }
    if (e._tag === "RuntimeInvalid" && /not a valid image reference|malformed|invalid reference/i.test(e.message)) {
      yield* deps.emit(pod, "Warning", "InspectFailed", `Failed to apply default image tag "${image}": ${e.message}`)
      yield* wait("InvalidImageName", e.message)
      return undefined
    }
    const failures = (backoff?.failures ?? 0) + 1
    state.imagePulls.set(name, { image, failures, retryAtMs: now + backoffDelayMs(failures), message: e.message })
    yield* deps.emit(pod, "Warning", "Failed", `Failed to pull image "${image}": ${e.message}`)
    yield* deps.emit(pod, "Warning", "Failed", "Error: ErrImagePull")
    yield* wait("ErrImagePull", e.message)
    return undefined
  })

/** Does the runtime's image `i` answer to reference `ref` (a name, or a pinned digest)? */
export const holds = (i: Runtime.Image, ref: string): boolean => {
  const at = ref.indexOf("@")
  if (at >= 0) {
    const digest = ref.slice(at + 1)
    const repo = ref.slice(0, at).replace(/:[^/:]*$/, "")
    return (i.repoDigests ?? []).some((d) => d === `${repo}@${digest}`) || (i.digest === digest && i.names.some((n) => n.startsWith(`${repo}:`)))
  }
  const slash = ref.lastIndexOf("/")
  const colon = ref.lastIndexOf(":")
  return i.names.includes(colon > slash ? ref : `${ref}:latest`)
}
