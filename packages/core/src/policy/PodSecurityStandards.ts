/**
 * The Pod Security Standards (https://kubernetes.io/docs/concepts/security/pod-security-standards/)
 * as a pure evaluation: the `privileged`, `baseline` and `restricted` levels, each a table of
 * checks over a pod's metadata and spec, and the namespace labels that choose a level per mode
 * (`pod-security.kubernetes.io/enforce|audit|warn` and `…-version`). The PodSecurity admission
 * plugin (`admission/PodSecurity.ts`) applies it; the words of every reason and detail are
 * kube-apiserver's, so a message reads as it would there:
 *
 *   violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "c" must set securityContext.allowPrivilegeEscalation=false), …
 *
 * Every version label (`latest`, `v1.N`) is evaluated with the latest checks: the older
 * versions differ only in checks of fields Fleet has never served (the seccomp alpha
 * annotations before v1.19 aside, which are checked at every version here).
 */
import * as FieldError from "../model/FieldError.js"

// ---- Levels, versions, policies ----------------------------------------------------------------

/** The three levels, from least to most restrictive. */
export const levels = ["privileged", "baseline", "restricted"] as const

/** A Pod Security level. */
export type Level = (typeof levels)[number]

/** A level with the policy version it was asked for (`latest` or `v1.N`). */
export interface LevelVersion {
  readonly level: Level
  readonly version: string
}

/** What a namespace asks of its pods in each mode. */
export interface Policy {
  readonly enforce: LevelVersion
  readonly audit: LevelVersion
  readonly warn: LevelVersion
}

/** The modes, in the order of their labels. */
export const modes = ["enforce", "audit", "warn"] as const

/** A mode: refuse (enforce), annotate the audit record (audit), or warn the client (warn). */
export type Mode = (typeof modes)[number]

/** The label prefix of every Pod Security label. */
export const labelPrefix = "pod-security.kubernetes.io/"

/** The level label of a mode (`pod-security.kubernetes.io/enforce`). */
export const levelLabel = (mode: Mode): string => `${labelPrefix}${mode}`

/** The version label of a mode (`pod-security.kubernetes.io/enforce-version`). */
export const versionLabel = (mode: Mode): string => `${labelPrefix}${mode}-version`

/** The audit annotation naming the violations of the audit level. */
export const auditViolationsAnnotation = `${labelPrefix}audit-violations`

/** The audit annotation naming the enforced level. */
export const enforcePolicyAnnotation = `${labelPrefix}enforce-policy`

/** The audit annotation naming why a request was exempt (`namespace`, `user`, `runtimeClass`). */
export const exemptAnnotation = `${labelPrefix}exempt`

/** `restricted:latest`, as messages name a level. */
export const describe = (lv: LevelVersion): string => `${lv.level}:${lv.version}`

/** A level at the latest version. */
export const latest = (level: Level): LevelVersion => ({ level, version: "latest" })

/** The same level in every mode. */
export const uniform = (level: Level): Policy => ({ enforce: latest(level), audit: latest(level), warn: latest(level) })

/** Whether `s` names a level. */
export const isLevel = (s: string): s is Level => (levels as ReadonlyArray<string>).includes(s)

/** -1, 0 or 1 as `a` is less, as or more restrictive than `b`. */
export const compareLevels = (a: Level, b: Level): number => Math.sign(levels.indexOf(a) - levels.indexOf(b))

const versionPattern = /^v1\.(0|[1-9][0-9]*)$/

/** Whether `s` is a policy version (`latest` or `v1.N`). */
export const isVersion = (s: string): boolean => s === "latest" || versionPattern.test(s)

/**
 * The policy a namespace's labels ask for, modes without labels taking `defaults`, and the
 * labels that are invalid (as kube-apiserver reports them). As in Kubernetes an invalid enforce
 * level evaluates as `restricted` (fail closed) and an invalid audit or warn level as
 * `privileged`; an invalid version as `latest`.
 */
export const policyOf = (
  labels: Readonly<Record<string, string>>,
  defaults: Policy
): { readonly policy: Policy; readonly errors: ReadonlyArray<FieldError.FieldError> } => {
  const errors: Array<FieldError.FieldError> = []
  const mode = (m: Mode): LevelVersion => {
    const level = labels[levelLabel(m)]
    const version = labels[versionLabel(m)]
    let lv = defaults[m]
    if (level !== undefined) {
      if (isLevel(level)) lv = { ...lv, level }
      else {
        errors.push(FieldError.invalid(`metadata.labels[${levelLabel(m)}]`, level, `must be one of ${levels.join(", ")}`))
        lv = { ...lv, level: m === "enforce" ? "restricted" : "privileged" }
      }
    }
    if (version !== undefined) {
      if (isVersion(version)) lv = { ...lv, version }
      else {
        errors.push(FieldError.invalid(`metadata.labels[${versionLabel(m)}]`, version, `must be "latest" or "v1.x"`))
        lv = { ...lv, version: "latest" }
      }
    }
    return lv
  }
  return { policy: { enforce: mode("enforce"), audit: mode("audit"), warn: mode("warn") }, errors }
}

/** Whether the labels name a level for `mode`. */
export const hasLevelLabel = (labels: Readonly<Record<string, string>>, mode: Mode): boolean => labels[levelLabel(mode)] !== undefined

// ---- The pod as the checks read it -------------------------------------------------------------

/** The security settings of a container the checks read (a structural subset of Kubernetes'). */
export interface ContainerSecurityContext {
  readonly privileged?: boolean
  readonly allowPrivilegeEscalation?: boolean
  readonly runAsNonRoot?: boolean
  readonly runAsUser?: number
  readonly capabilities?: { readonly add?: ReadonlyArray<string>; readonly drop?: ReadonlyArray<string> }
  readonly seccompProfile?: { readonly type?: string }
  readonly appArmorProfile?: { readonly type?: string }
  readonly seLinuxOptions?: SeLinuxOptions
  readonly procMount?: string
  readonly windowsOptions?: { readonly hostProcess?: boolean }
}

/** SELinux options (pod or container). */
export interface SeLinuxOptions {
  readonly type?: string
  readonly user?: string
  readonly role?: string
  readonly level?: string
}

/** The pod-level security settings the checks read. */
export interface PodSecurityContext {
  readonly runAsNonRoot?: boolean
  readonly runAsUser?: number
  readonly seccompProfile?: { readonly type?: string }
  readonly appArmorProfile?: { readonly type?: string }
  readonly seLinuxOptions?: SeLinuxOptions
  readonly sysctls?: ReadonlyArray<{ readonly name?: string }>
  readonly windowsOptions?: { readonly hostProcess?: boolean }
}

/** A container as the checks read it. */
export interface ContainerView {
  readonly name?: string
  readonly image?: string
  readonly ports?: ReadonlyArray<{ readonly hostPort?: number }>
  readonly securityContext?: ContainerSecurityContext
  readonly livenessProbe?: HostedHandler
  readonly readinessProbe?: HostedHandler
  readonly startupProbe?: HostedHandler
  readonly lifecycle?: { readonly postStart?: HostedHandler; readonly preStop?: HostedHandler }
}

/** A probe or lifecycle handler: the hosts its HTTP and TCP actions name. */
export interface HostedHandler {
  readonly httpGet?: { readonly host?: string }
  readonly tcpSocket?: { readonly host?: string }
}

/** A volume: its name and one source field (`hostPath`, `configMap`, …). */
export type VolumeView = { readonly name?: string } & Readonly<Record<string, unknown>>

/** A pod spec (or a pod template's) as the checks read it. */
export interface PodSpecView {
  readonly hostNetwork?: boolean
  readonly hostPID?: boolean
  readonly hostIPC?: boolean
  readonly securityContext?: PodSecurityContext
  readonly containers?: ReadonlyArray<ContainerView>
  readonly initContainers?: ReadonlyArray<ContainerView>
  readonly ephemeralContainers?: ReadonlyArray<ContainerView>
  readonly volumes?: ReadonlyArray<VolumeView>
  readonly runtimeClassName?: string
}

/** A pod (or pod template): its annotations and spec. */
export interface PodView {
  readonly metadata?: { readonly annotations?: Readonly<Record<string, string>> }
  readonly spec?: PodSpecView
}

// Decoded objects have these shapes; the readers still never throw on any other input.
const list = <A>(v: ReadonlyArray<A> | undefined): ReadonlyArray<A> => (Array.isArray(v) ? v : [])
const record = <A extends object>(v: A | undefined): Partial<A> => (typeof v === "object" && v !== null && !Array.isArray(v) ? v : {})

/** Init containers, containers and ephemeral containers, in that order (kube's visitContainers). */
const allContainers = (spec: PodSpecView): ReadonlyArray<ContainerView> => [
  ...list(spec.initContainers),
  ...list(spec.containers),
  ...list(spec.ephemeralContainers)
]

const nameOf = (c: ContainerView) => (typeof c.name === "string" ? c.name : "")
const ctx = (c: ContainerView): ContainerSecurityContext => record(c.securityContext)

// ---- Message words -----------------------------------------------------------------------------

const joinQuote = (items: ReadonlyArray<string>) => (items.length === 0 ? "" : `"${items.join('", "')}"`)
const plural = (singular: string, several: string, n: number) => (n === 1 ? singular : several)
const sortedUnique = (items: Iterable<string>) => [...new Set(items)].sort()
const containersPhrase = (names: ReadonlyArray<string>) => `${plural("container", "containers", names.length)} ${joinQuote(names)}`

// ---- Checks ------------------------------------------------------------------------------------

/** One failed check: kube's forbidden reason and detail. */
export interface Violation {
  readonly reason: string
  readonly detail: string
}

/** One check of a level: a pure function of the pod, undefined when it passes. */
export interface Check {
  readonly id: string
  readonly level: Exclude<Level, "privileged">
  /** Baseline checks this one replaces at `restricted` (it checks a superset). */
  readonly overrides?: ReadonlyArray<string>
  readonly check: (pod: PodView) => Violation | undefined
}

const specOf = (pod: PodView): PodSpecView => record(pod.spec)
const annotationsOf = (pod: PodView): Readonly<Record<string, string | undefined>> => record(record(pod.metadata).annotations)

/** Baseline: which capabilities a container may add (Docker's default set). */
export const baselineCapabilities: ReadonlySet<string> = new Set([
  "AUDIT_WRITE",
  "CHOWN",
  "DAC_OVERRIDE",
  "FOWNER",
  "FSETID",
  "KILL",
  "MKNOD",
  "NET_BIND_SERVICE",
  "SETFCAP",
  "SETGID",
  "SETPCAP",
  "SETUID",
  "SYS_CHROOT"
])

/** Baseline: the sysctls a pod may set (namespaced and isolated from other pods). */
export const safeSysctls: ReadonlySet<string> = new Set([
  "kernel.shm_rmid_forced",
  "net.ipv4.ip_local_port_range",
  "net.ipv4.ip_unprivileged_port_start",
  "net.ipv4.tcp_syncookies",
  "net.ipv4.ping_group_range",
  "net.ipv4.ip_local_reserved_ports",
  "net.ipv4.tcp_keepalive_time",
  "net.ipv4.tcp_fin_timeout",
  "net.ipv4.tcp_keepalive_intvl",
  "net.ipv4.tcp_keepalive_probes"
])

/** Restricted: the volume sources a pod may use. */
export const restrictedVolumeSources: ReadonlySet<string> = new Set([
  "configMap",
  "csi",
  "downwardAPI",
  "emptyDir",
  "ephemeral",
  "persistentVolumeClaim",
  "projected",
  "secret"
])

const selinuxTypes: ReadonlySet<string> = new Set(["", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"])
const appArmorAnnotationPrefix = "container.apparmor.security.beta.kubernetes.io/"
const seccompPodAnnotation = "seccomp.security.alpha.kubernetes.io/pod"
const seccompContainerAnnotationPrefix = "container.seccomp.security.alpha.kubernetes.io/"
const validSeccompType = (t: unknown) => t === "RuntimeDefault" || t === "Localhost"
const validAppArmorType = (t: unknown) => t === "RuntimeDefault" || t === "Localhost"

/** `pod and containers "a", "b"`: who set a forbidden value. */
const setters = (pod: boolean, containers: ReadonlyArray<string>) =>
  [...(pod ? ["pod"] : []), ...(containers.length > 0 ? [containersPhrase(containers)] : [])].join(" and ")

const hostProcess: Check = {
  id: "windowsHostProcess",
  level: "baseline",
  check: (pod) => {
    const spec = specOf(pod)
    const onPod = record(record(spec.securityContext).windowsOptions).hostProcess === true
    const bad = allContainers(spec).filter((c) => record(ctx(c).windowsOptions).hostProcess === true).map(nameOf)
    return !onPod && bad.length === 0
      ? undefined
      : { reason: "hostProcess", detail: `${setters(onPod, bad)} must not set securityContext.windowsOptions.hostProcess=true` }
  }
}

const hostNamespaces: Check = {
  id: "hostNamespaces",
  level: "baseline",
  check: (pod) => {
    const spec = specOf(pod)
    const shared = [
      ...(spec.hostNetwork === true ? ["hostNetwork=true"] : []),
      ...(spec.hostPID === true ? ["hostPID=true"] : []),
      ...(spec.hostIPC === true ? ["hostIPC=true"] : [])
    ]
    return shared.length === 0 ? undefined : { reason: "host namespaces", detail: shared.join(", ") }
  }
}

const privileged: Check = {
  id: "privileged",
  level: "baseline",
  check: (pod) => {
    const bad = allContainers(specOf(pod)).filter((c) => ctx(c).privileged === true).map(nameOf)
    return bad.length === 0 ? undefined : { reason: "privileged", detail: `${containersPhrase(bad)} must not set securityContext.privileged=true` }
  }
}

const capabilitiesBaseline: Check = {
  id: "capabilities_baseline",
  level: "baseline",
  check: (pod) => {
    const bad: Array<string> = []
    const added = new Set<string>()
    for (const c of allContainers(specOf(pod))) {
      const extra = list(record(ctx(c).capabilities).add).filter((cap) => !baselineCapabilities.has(cap))
      if (extra.length > 0) bad.push(nameOf(c))
      for (const cap of extra) added.add(String(cap))
    }
    return bad.length === 0
      ? undefined
      : { reason: "non-default capabilities", detail: `${containersPhrase(bad)} must not include ${joinQuote(sortedUnique(added))} in securityContext.capabilities.add` }
  }
}

const hostPathVolumes: Check = {
  id: "hostPathVolumes",
  level: "baseline",
  check: (pod) => {
    const bad = list(specOf(pod).volumes)
      .filter((v) => record(v)["hostPath"] !== undefined)
      .map((v) => String(v.name ?? ""))
    return bad.length === 0 ? undefined : { reason: "hostPath volumes", detail: `${plural("volume", "volumes", bad.length)} ${joinQuote(bad)}` }
  }
}

const hostPorts: Check = {
  id: "hostPorts",
  level: "baseline",
  check: (pod) => {
    const bad: Array<string> = []
    const ports = new Set<string>()
    for (const c of allContainers(specOf(pod))) {
      const used = list(c.ports)
        .map((p) => record(p).hostPort)
        .filter((p): p is number => typeof p === "number" && p !== 0)
      if (used.length > 0) bad.push(nameOf(c))
      for (const p of used) ports.add(String(p))
    }
    const sorted = sortedUnique(ports)
    return bad.length === 0
      ? undefined
      : {
          reason: "hostPort",
          detail: `${containersPhrase(bad)} ${plural("uses", "use", bad.length)} ${plural("hostPort", "hostPorts", sorted.length)} ${sorted.join(", ")}`
        }
  }
}

const hostProbes: Check = {
  id: "hostProbesAndHostLifecycle",
  level: "baseline",
  check: (pod) => {
    const bad = new Set<string>()
    const hosts = new Set<string>()
    for (const c of allContainers(specOf(pod))) {
      const lifecycle = record(c.lifecycle)
      for (const handler of [c.livenessProbe, c.readinessProbe, c.startupProbe, lifecycle.postStart, lifecycle.preStop]) {
        const h = record(handler)
        for (const action of [h.httpGet, h.tcpSocket]) {
          const host = record(action).host
          if (typeof host === "string" && host !== "") {
            bad.add(nameOf(c))
            hosts.add(host)
          }
        }
      }
    }
    const names = sortedUnique(bad)
    const sorted = sortedUnique(hosts)
    return names.length === 0
      ? undefined
      : {
          reason: "probe or lifecycle host",
          detail: `${containersPhrase(names)} ${plural("uses", "use", names.length)} ${plural("probe or lifecycle host", "probe or lifecycle hosts", sorted.length)} ${joinQuote(sorted)}`
        }
  }
}

const appArmorProfile: Check = {
  id: "appArmorProfile",
  level: "baseline",
  check: (pod) => {
    const spec = specOf(pod)
    const badValues = new Set<string>()
    const podType = record(record(spec.securityContext).appArmorProfile).type
    const onPod = podType !== undefined && !validAppArmorType(podType)
    if (onPod) badValues.add(String(podType))
    const bad: Array<string> = []
    for (const c of allContainers(spec)) {
      const t = record(ctx(c).appArmorProfile).type
      if (t !== undefined && !validAppArmorType(t)) {
        bad.push(nameOf(c))
        badValues.add(String(t))
      }
    }
    const annotations = Object.entries(annotationsOf(pod))
      .filter(([k, v]) => k.startsWith(appArmorAnnotationPrefix) && typeof v === "string" && !(v === "" || v === "runtime/default" || v.startsWith("localhost/")))
      .map(([k, v]) => `${k}=${JSON.stringify(v)}`)
      .sort()
    const who = [setters(onPod, bad), ...(annotations.length > 0 ? [plural("annotation", "annotations", annotations.length)] : [])].filter((s) => s !== "")
    const values = [...sortedUnique(badValues), ...annotations]
    return who.length === 0
      ? undefined
      : {
          reason: plural("forbidden AppArmor profile", "forbidden AppArmor profiles", values.length),
          detail: `${who.join(" and ")} must not set AppArmor profile type to ${joinQuote(values)}`
        }
  }
}

const seLinuxOptions: Check = {
  id: "seLinuxOptions",
  level: "baseline",
  check: (pod) => {
    const spec = specOf(pod)
    const badTypes = new Set<string>()
    let setUser = false
    let setRole = false
    const valid = (o: SeLinuxOptions | undefined) => {
      if (o === undefined || o === null) return true
      const opts = record(o)
      let ok = true
      const type = typeof opts.type === "string" ? opts.type : ""
      if (!selinuxTypes.has(type)) {
        ok = false
        badTypes.add(type)
      }
      if (typeof opts.user === "string" && opts.user !== "") {
        ok = false
        setUser = true
      }
      if (typeof opts.role === "string" && opts.role !== "") {
        ok = false
        setRole = true
      }
      return ok
    }
    const onPod = !valid(record(spec.securityContext).seLinuxOptions)
    const bad = allContainers(spec)
      .filter((c) => !valid(ctx(c).seLinuxOptions))
      .map(nameOf)
    if (!onPod && bad.length === 0) return undefined
    const what = [
      ...(badTypes.size > 0 ? [`${plural("type", "types", badTypes.size)} ${joinQuote(sortedUnique(badTypes))}`] : []),
      ...(setUser ? ["user may not be set"] : []),
      ...(setRole ? ["role may not be set"] : [])
    ]
    return { reason: "seLinuxOptions", detail: `${setters(onPod, bad)} set forbidden securityContext.seLinuxOptions: ${what.join("; ")}` }
  }
}

const procMount: Check = {
  id: "procMount",
  level: "baseline",
  check: (pod) => {
    const bad: Array<string> = []
    const types = new Set<string>()
    for (const c of allContainers(specOf(pod))) {
      const m = ctx(c).procMount
      if (m !== undefined && m !== "Default") {
        bad.push(nameOf(c))
        types.add(String(m))
      }
    }
    return bad.length === 0
      ? undefined
      : { reason: "procMount", detail: `${containersPhrase(bad)} must not set securityContext.procMount to ${joinQuote(sortedUnique(types))}` }
  }
}

const seccompAnnotations = (pod: PodView): ReadonlyArray<string> => {
  const annotations = annotationsOf(pod)
  const ok = (v: string) => v === "runtime/default" || v === "docker/default" || v.startsWith("localhost/")
  const bad: Array<string> = []
  const podValue = annotations[seccompPodAnnotation]
  if (typeof podValue === "string" && !ok(podValue)) bad.push(`${seccompPodAnnotation}=${JSON.stringify(podValue)}`)
  for (const c of allContainers(specOf(pod))) {
    const key = seccompContainerAnnotationPrefix + nameOf(c)
    const v = annotations[key]
    if (typeof v === "string" && !ok(v)) bad.push(`${key}=${JSON.stringify(v)}`)
  }
  return sortedUnique(bad)
}

/** Who set seccompProfile.type to a value other than RuntimeDefault/Localhost, and what; who left it unset. */
const seccompSetters = (spec: PodSpecView) => {
  const badValues = new Set<string>()
  const podType = record(record(spec.securityContext).seccompProfile).type
  const onPod = podType !== undefined && !validSeccompType(podType)
  if (onPod) badValues.add(String(podType))
  const podSet = podType !== undefined && validSeccompType(podType)
  const explicit: Array<string> = []
  const implicit: Array<string> = []
  for (const c of allContainers(spec)) {
    const profile = ctx(c).seccompProfile
    if (profile !== undefined && profile !== null) {
      const t = record(profile).type
      if (!validSeccompType(t)) {
        explicit.push(nameOf(c))
        badValues.add(String(t))
      }
    } else if (!podSet) implicit.push(nameOf(c))
  }
  return { onPod, explicit, implicit, badValues: sortedUnique(badValues) }
}

const seccompBaseline: Check = {
  id: "seccompProfile_baseline",
  level: "baseline",
  check: (pod) => {
    const s = seccompSetters(specOf(pod))
    if (s.onPod || s.explicit.length > 0) {
      return { reason: "seccompProfile", detail: `${setters(s.onPod, s.explicit)} must not set securityContext.seccompProfile.type to ${joinQuote(s.badValues)}` }
    }
    const annotations = seccompAnnotations(pod)
    return annotations.length === 0
      ? undefined
      : { reason: "seccompProfile", detail: `forbidden ${plural("annotation", "annotations", annotations.length)} ${annotations.join(", ")}` }
  }
}

const sysctls: Check = {
  id: "sysctls",
  level: "baseline",
  check: (pod) => {
    const bad = list(record(specOf(pod).securityContext).sysctls)
      .map((s) => String(record(s).name ?? ""))
      .filter((n) => !safeSysctls.has(n))
    return bad.length === 0 ? undefined : { reason: "forbidden sysctls", detail: bad.join(", ") }
  }
}

const restrictedVolumes: Check = {
  id: "restrictedVolumes",
  level: "restricted",
  overrides: ["hostPathVolumes"],
  check: (pod) => {
    const bad: Array<string> = []
    const types = new Set<string>()
    for (const v of list(specOf(pod).volumes)) {
      const sources = Object.keys(record(v)).filter((k) => k !== "name")
      // A volume without a source is an emptyDir (Kubernetes' defaulting).
      const forbidden = sources.filter((k) => !restrictedVolumeSources.has(k))
      if (forbidden.length === 0) continue
      bad.push(String(v.name ?? ""))
      for (const k of forbidden) types.add(k)
    }
    const sorted = sortedUnique(types)
    return bad.length === 0
      ? undefined
      : {
          reason: "restricted volume types",
          detail: `${plural("volume", "volumes", bad.length)} ${joinQuote(bad)} ${plural("uses", "use", bad.length)} ${plural("restricted volume type", "restricted volume types", sorted.length)} ${joinQuote(sorted)}`
        }
  }
}

const allowPrivilegeEscalation: Check = {
  id: "allowPrivilegeEscalation",
  level: "restricted",
  check: (pod) => {
    const bad = allContainers(specOf(pod))
      .filter((c) => ctx(c).allowPrivilegeEscalation !== false)
      .map(nameOf)
    return bad.length === 0
      ? undefined
      : { reason: "allowPrivilegeEscalation != false", detail: `${containersPhrase(bad)} must set securityContext.allowPrivilegeEscalation=false` }
  }
}

const runAsNonRoot: Check = {
  id: "runAsNonRoot",
  level: "restricted",
  check: (pod) => {
    const spec = specOf(pod)
    const podValue = record(spec.securityContext).runAsNonRoot
    const onPod = podValue === false
    const explicit: Array<string> = []
    const implicit: Array<string> = []
    for (const c of allContainers(spec)) {
      const v = ctx(c).runAsNonRoot
      if (v !== undefined && v !== null) {
        if (v !== true) explicit.push(nameOf(c))
      } else if (podValue !== true) implicit.push(nameOf(c))
    }
    if (onPod || explicit.length > 0) {
      return { reason: "runAsNonRoot != true", detail: `${setters(onPod, explicit)} must not set securityContext.runAsNonRoot=false` }
    }
    return implicit.length === 0
      ? undefined
      : { reason: "runAsNonRoot != true", detail: `pod or ${containersPhrase(implicit)} must set securityContext.runAsNonRoot=true` }
  }
}

const runAsUser: Check = {
  id: "runAsUser",
  level: "restricted",
  check: (pod) => {
    const spec = specOf(pod)
    const onPod = record(spec.securityContext).runAsUser === 0
    const bad = allContainers(spec)
      .filter((c) => ctx(c).runAsUser === 0)
      .map(nameOf)
    return !onPod && bad.length === 0 ? undefined : { reason: "runAsUser=0", detail: `${setters(onPod, bad)} must not set runAsUser=0` }
  }
}

const seccompRestricted: Check = {
  id: "seccompProfile_restricted",
  level: "restricted",
  overrides: ["seccompProfile_baseline"],
  check: (pod) => {
    const s = seccompSetters(specOf(pod))
    if (s.onPod || s.explicit.length > 0) {
      return { reason: "seccompProfile", detail: `${setters(s.onPod, s.explicit)} must not set securityContext.seccompProfile.type to ${joinQuote(s.badValues)}` }
    }
    return s.implicit.length === 0
      ? undefined
      : { reason: "seccompProfile", detail: `pod or ${containersPhrase(s.implicit)} must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost"` }
  }
}

const capabilitiesRestricted: Check = {
  id: "capabilities_restricted",
  level: "restricted",
  overrides: ["capabilities_baseline"],
  check: (pod) => {
    const missingDrop: Array<string> = []
    const adding: Array<string> = []
    const added = new Set<string>()
    for (const c of allContainers(specOf(pod))) {
      const caps = record(ctx(c).capabilities)
      if (!list(caps.drop).includes("ALL")) missingDrop.push(nameOf(c))
      const extra = list(caps.add).filter((cap) => cap !== "NET_BIND_SERVICE")
      if (extra.length > 0) adding.push(nameOf(c))
      for (const cap of extra) added.add(String(cap))
    }
    const details = [
      ...(missingDrop.length > 0 ? [`${containersPhrase(missingDrop)} must set securityContext.capabilities.drop=["ALL"]`] : []),
      ...(adding.length > 0 ? [`${containersPhrase(adding)} must not include ${joinQuote(sortedUnique(added))} in securityContext.capabilities.add`] : [])
    ]
    return details.length === 0 ? undefined : { reason: "unrestricted capabilities", detail: details.join("; ") }
  }
}

/**
 * Every check, in kube's order (by id, baseline first, then restricted), so that messages list
 * violations as kube-apiserver does.
 */
export const checks: ReadonlyArray<Check> = [
  appArmorProfile,
  capabilitiesBaseline,
  hostNamespaces,
  hostPathVolumes,
  hostPorts,
  hostProbes,
  privileged,
  procMount,
  seLinuxOptions,
  seccompBaseline,
  sysctls,
  hostProcess,
  allowPrivilegeEscalation,
  capabilitiesRestricted,
  restrictedVolumes,
  runAsNonRoot,
  runAsUser,
  seccompRestricted
]

const overridden = new Set(checks.flatMap((c) => c.overrides ?? []))

/** The checks of a level (restricted includes the baseline checks it does not replace). */
export const checksOf = (level: Level): ReadonlyArray<Check> =>
  level === "privileged"
    ? []
    : level === "baseline"
      ? checks.filter((c) => c.level === "baseline")
      : checks.filter((c) => c.level === "restricted" || !overridden.has(c.id))

/** The violations of `pod` at a level (none at `privileged`). */
export const evaluate = (lv: LevelVersion, pod: PodView): ReadonlyArray<Violation> =>
  checksOf(lv.level).flatMap((c) => c.check(pod) ?? [])

/** `reason (detail), reason (detail)`: violations as kube's messages list them. */
export const formatViolations = (violations: ReadonlyArray<Violation>): string =>
  violations.map((v) => (v.detail === "" ? v.reason : `${v.reason} (${v.detail})`)).join(", ")

/** `reason, reason`: the reasons alone (kube's summary of an existing pod). */
export const formatReasons = (violations: ReadonlyArray<Violation>): string => violations.map((v) => v.reason).join(", ")
