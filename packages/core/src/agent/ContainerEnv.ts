/**
 * A container's environment and command line, as the kubelet builds them
 * (`makeEnvironmentVariables`): first Fleet's host-port variables (`PORT`, `FLEET_PORT_<NAME>`),
 * then `envFrom` (every valid key of a ConfigMap or Secret, with its prefix), then `env` in order
 * (literal values with `$(VAR)` references to earlier variables expanded; `valueFrom` a ConfigMap
 * or Secret key, a pod field — the downward API — or a resource request/limit). A later variable
 * of the same name replaces an earlier one. A missing ConfigMap or Secret, or key, that is not
 * `optional` is an error with the kubelet's message; the container then waits with reason
 * `CreateContainerConfigError`. `command` and `args` get `$(VAR)` expanded with the result.
 *
 * Departure: Docker-link service variables (`enableServiceLinks`) are not generated.
 */
import { Either } from "effect"
import type * as Config from "../model/Config.js"
import type * as Pod from "../model/Pod.js"
import * as Quantity from "../model/Quantity.js"

/** An environment variable with its final value. */
export interface EnvVar {
  readonly name: string
  readonly value: string
}

/** The ConfigMaps and Secrets of the pod's namespace the agent fetched (undefined: not found). */
export interface Lookup {
  readonly configMap: (name: string) => Config.ConfigMap | undefined
  readonly secret: (name: string) => Config.Secret | undefined
}

/** What the environment may refer to beyond the pod. */
export interface Context {
  readonly hostIP: string
  readonly podIP: string
  /** The node's allocatable resources (the default of an unset limit). */
  readonly nodeAllocatable: Readonly<Record<string, string>>
  /** Variables defined before everything else (Fleet's host ports). */
  readonly initial: ReadonlyArray<EnvVar>
}

// Kubernetes' IsEnvVarName: keys that are not are skipped when importing a whole ConfigMap/Secret.
const envVarName = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/

/** The value of a secret key (base64 in the API) as text. */
export const decodeBase64 = (data: string): string => {
  const binary = atob(data)
  const bytes = new Uint8Array(binary.length)
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
  return new TextDecoder().decode(bytes)
}

/**
 * Kubernetes' `$(VAR)` expansion: a defined variable is replaced, an undefined reference is kept
 * as written, `$$` is a literal `$`.
 */
export const expand = (input: string, lookup: (name: string) => string | undefined): string => {
  let out = ""
  let checkpoint = 0
  for (let cursor = 0; cursor < input.length; cursor++) {
    if (input[cursor] !== "$" || cursor + 1 >= input.length) continue
    out += input.slice(checkpoint, cursor)
    const rest = input.slice(cursor + 1)
    let advance = 1
    if (rest[0] === "$") out += "$"
    else if (rest[0] === "(") {
      const close = rest.indexOf(")")
      if (close < 0) out += "$("
      else {
        const name = rest.slice(1, close)
        out += lookup(name) ?? `$(${name})`
        advance = close + 1
      }
    } else out += `$${rest[0]}`
    cursor += advance
    checkpoint = cursor + 1
  }
  return out + input.slice(checkpoint)
}

// metadata.labels / metadata.annotations as the downward API formats a map: sorted `k="v"` lines.
const formatMap = (m: Readonly<Record<string, string>> | undefined): string =>
  Object.keys(m ?? {})
    .sort()
    .map((k) => `${k}=${JSON.stringify(m![k])}`)
    .join("\n")

/** The value of a downward-API `fieldPath` of the pod (undefined: unsupported path). */
export const fieldValue = (pod: Pod.Pod, fieldPath: string, context: Pick<Context, "hostIP" | "podIP">): string | undefined => {
  const m = /^metadata\.(labels|annotations)\['(.*)'\]$/.exec(fieldPath)
  if (m !== null) return (m[1] === "labels" ? pod.metadata.labels : pod.metadata.annotations)?.[m[2]!] ?? ""
  switch (fieldPath) {
    case "metadata.name":
      return pod.metadata.name ?? ""
    case "metadata.namespace":
      return pod.metadata.namespace ?? ""
    case "metadata.uid":
      return pod.metadata.uid ?? ""
    case "metadata.labels":
      return formatMap(pod.metadata.labels)
    case "metadata.annotations":
      return formatMap(pod.metadata.annotations)
    case "spec.nodeName":
      return pod.spec.nodeName ?? ""
    case "spec.serviceAccountName":
      return pod.spec.serviceAccountName ?? ""
    case "status.hostIP":
    case "status.hostIPs":
      return context.hostIP
    case "status.podIP":
    case "status.podIPs":
      return context.podIP
    default:
      return undefined
  }
}

const ceilDiv = (a: bigint, b: bigint) => (b === 0n ? 0n : (a + b - 1n) / b)

/** The value of a `resourceFieldRef` (limits default to the node's allocatable), rounded up by its divisor. */
export const resourceValue = (pod: Pod.Pod, container: Pod.Container, selector: typeof Pod.ResourceFieldSelector.Type, allocatable: Readonly<Record<string, string>>): string | undefined => {
  const target = selector.containerName === undefined || selector.containerName === "" ? container : [...pod.spec.containers, ...(pod.spec.initContainers ?? [])].find((c) => c.name === selector.containerName)
  if (target === undefined) return undefined
  const m = /^(limits|requests)\.(.+)$/.exec(selector.resource)
  if (m === null) return undefined
  const kind = m[1] === "limits" ? "limits" : "requests"
  const resource = m[2] ?? ""
  const raw = target.resources?.[kind]?.[resource] ?? (kind === "limits" ? allocatable[resource] : undefined) ?? "0"
  const value = Quantity.parse(raw)
  if (Either.isLeft(value)) return undefined
  const divisorText = selector.divisor ?? "1"
  const divisor = Quantity.parse(divisorText)
  if (Either.isLeft(divisor) || divisor.right.nanos === 0n) return undefined
  return String(ceilDiv(value.right.nanos, divisor.right.nanos))
}

/** The environment of `container`, or the kubelet's error message. */
export const resolve = (pod: Pod.Pod, container: Pod.Container, lookup: Lookup, context: Context): Either.Either<ReadonlyArray<EnvVar>, string> => {
  const ns = pod.metadata.namespace ?? ""
  const env = new Map<string, string>()
  for (const v of context.initial) env.set(v.name, v.value)
  for (const from of container.envFrom ?? []) {
    const prefix = from.prefix ?? ""
    if (from.configMapRef !== undefined) {
      const name = from.configMapRef.name ?? ""
      const cm = lookup.configMap(name)
      if (cm === undefined) {
        if (from.configMapRef.optional === true) continue
        return Either.left(`configmap "${name}" not found`)
      }
      for (const [k, v] of Object.entries(cm.data ?? {})) if (envVarName.test(prefix + k)) env.set(prefix + k, v)
    } else if (from.secretRef !== undefined) {
      const name = from.secretRef.name ?? ""
      const secret = lookup.secret(name)
      if (secret === undefined) {
        if (from.secretRef.optional === true) continue
        return Either.left(`secret "${name}" not found`)
      }
      for (const [k, v] of Object.entries(secret.data ?? {})) if (envVarName.test(prefix + k)) env.set(prefix + k, decodeBase64(v))
    }
  }
  for (const v of container.env ?? []) {
    const from = v.valueFrom
    if (from === undefined) {
      env.set(v.name, expand(v.value ?? "", (name) => env.get(name)))
      continue
    }
    if (from.configMapKeyRef !== undefined) {
      const ref = from.configMapKeyRef
      const cm = lookup.configMap(ref.name ?? "")
      if (cm === undefined) {
        if (ref.optional === true) continue
        return Either.left(`configmap "${ref.name ?? ""}" not found`)
      }
      const value = cm.data?.[ref.key]
      if (value === undefined) {
        if (ref.optional === true) continue
        return Either.left(`couldn't find key ${ref.key} in ConfigMap ${ns}/${ref.name ?? ""}`)
      }
      env.set(v.name, value)
    } else if (from.secretKeyRef !== undefined) {
      const ref = from.secretKeyRef
      const secret = lookup.secret(ref.name ?? "")
      if (secret === undefined) {
        if (ref.optional === true) continue
        return Either.left(`secret "${ref.name ?? ""}" not found`)
      }
      const value = secret.data?.[ref.key]
      if (value === undefined) {
        if (ref.optional === true) continue
        return Either.left(`couldn't find key ${ref.key} in Secret ${ns}/${ref.name ?? ""}`)
      }
      env.set(v.name, decodeBase64(value))
    } else if (from.fieldRef !== undefined) {
      const value = fieldValue(pod, from.fieldRef.fieldPath, context)
      if (value === undefined) return Either.left(`unsupported fieldPath: ${from.fieldRef.fieldPath}`)
      env.set(v.name, value)
    } else if (from.resourceFieldRef !== undefined) {
      const value = resourceValue(pod, container, from.resourceFieldRef, context.nodeAllocatable)
      if (value === undefined) return Either.left(`unsupported resource: ${from.resourceFieldRef.resource}`)
      env.set(v.name, value)
    }
  }
  return Either.right([...env].map(([name, value]) => ({ name, value })))
}

/** The container's command and args with `$(VAR)` expanded from `env`. */
export const commandLine = (container: Pod.Container, env: ReadonlyArray<EnvVar>): { readonly command: ReadonlyArray<string>; readonly args: ReadonlyArray<string> } => {
  const vars = new Map(env.map((v) => [v.name, v.value]))
  const lookup = (name: string) => vars.get(name)
  return { command: (container.command ?? []).map((c) => expand(c, lookup)), args: (container.args ?? []).map((a) => expand(a, lookup)) }
}

/** The ConfigMaps and Secrets a container's environment names. */
export const references = (container: Pod.Container): { readonly configMaps: ReadonlyArray<string>; readonly secrets: ReadonlyArray<string> } => {
  const configMaps = new Set<string>()
  const secrets = new Set<string>()
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef?.name) configMaps.add(from.configMapRef.name)
    if (from.secretRef?.name) secrets.add(from.secretRef.name)
  }
  for (const v of container.env ?? []) {
    if (v.valueFrom?.configMapKeyRef?.name) configMaps.add(v.valueFrom.configMapKeyRef.name)
    if (v.valueFrom?.secretKeyRef?.name) secrets.add(v.valueFrom.secretKeyRef.name)
  }
  return { configMaps: [...configMaps], secrets: [...secrets] }
}
