/**
 * VolumeBinding (upstream `volumebinding`), for local PersistentVolumes: a pod's claims must be
 * usable from the node. A bound claim's volume must allow the node by its
 * `spec.nodeAffinity.required` (`node(s) had volume node affinity conflict`); an unbound claim
 * whose binding waits for the first consumer needs an Available volume of its class, with enough
 * capacity, its access modes and volume mode, matching its `selector`, that allows the node
 * (`node(s) didn't find available persistent volumes to bind`); two claims of one pod never get
 * the same volume; the smallest fitting volume wins, a volume pre-bound to the claim (its
 * `claimRef`) first. PreFilter rejects a missing claim (`persistentvolumeclaim "x" not found`),
 * one being deleted, and unbound claims with Immediate binding (`pod has unbound immediate
 * PersistentVolumeClaims`), all UnschedulableAndUnresolvable. Reserve picks the volumes on the
 * chosen node into the cycle state and holds them from other pods until Unreserve or until the
 * volume shows its `claimRef`; the runtime writes the binding from `bindings(state)`.
 *
 * The plugin reads claims, volumes and classes through a `VolumeLookup` given as `volumes` in the
 * factory handle (or args); without one it cannot see storage and skips every pod, as the
 * baseline scheduler ignored volumes. A claim's binding mode comes from its
 * StorageClass's `volumeBindingMode` when the lookup has the class, else from the
 * `waitForFirstConsumer` class names in the args, else Immediate. Dynamic provisioning: a
 * waiting claim no volume fits on a node can still go there when its class has a provisioner that
 * can make a volume on that node (the class's `allowedTopologies`; for Fleet's local-path
 * provisioner, a node whose agent advertises its root); Reserve then records the node, and the
 * runtime annotates the claim `volume.kubernetes.io/selected-node` for the provisioner.
 * Departures: a claim with no class waits for its first consumer (upstream: Immediate); a volume
 * with no `claimRef` still in phase Pending (or with no phase) counts as Available; the pod is
 * bound without waiting for the provisioner (the agent waits for the claim to be bound); no
 * storage capacity scoring, no ephemeral volume creation (an ephemeral volume's claim
 * `<pod>-<volume>` must exist and be owned by the pod).
 */
import type { JsonObject } from "../../object/Json.js"
import * as LabelSelector from "../../model/LabelSelector.js"
import * as Quantity from "../../model/Quantity.js"
import type { CycleState, Factory, FilterPlugin, Handle, PreFilterPlugin, ReservePlugin, Status } from "../Framework.js"
import { status, success } from "../Framework.js"
import { matchesNodeSelectorTerms } from "../../matching/NodeAffinity.js"
import type { NodeInfo, Snapshot } from "../Snapshot.js"
import { asArray, asObject, asString } from "../../object/Json.js"

/** The plugin's name in profiles (upstream's). */
export const name = "VolumeBinding"

/** A bound claim's volume does not allow the node. */
export const reasonNodeConflict = "node(s) had volume node affinity conflict"

/** No available volume on the node fits an unbound claim. */
export const reasonBindConflict = "node(s) didn't find available persistent volumes to bind"

/** A bound claim names a volume that does not exist. */
export const reasonPVNotExist = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"

/** PreFilter's reason for unbound claims whose binding does not wait for the scheduler. */
export const reasonUnboundImmediate = "pod has unbound immediate PersistentVolumeClaims"

/** Where the plugin reads storage objects (the runtime passes informer-backed lookups). */
export interface VolumeLookup {
  /** A PersistentVolumeClaim by namespace and name. */
  readonly claim: (namespace: string, name: string) => JsonObject | undefined
  /** Every PersistentVolume. */
  readonly volumes: () => ReadonlyArray<JsonObject>
  /** A StorageClass by name, when Fleet has the kind (its `volumeBindingMode` is read). */
  readonly storageClass?: (name: string) => JsonObject | undefined
}

/** The plugin's arguments. */
export interface Args {
  /** Class names whose claims wait for their first consumer when the lookup has no StorageClass. */
  readonly waitForFirstConsumer?: ReadonlyArray<string>
  readonly volumes?: VolumeLookup
}

/** What the factory reads from its handle beyond the framework's. */
export interface VolumeHandle extends Handle {
  readonly volumes?: VolumeLookup
}

/**
 * A claim to bind to a volume: the runtime sets the volume's `claimRef` and the claim's
 * `volumeName`; or, `volume` empty, a claim to provision on the chosen node: the runtime sets the
 * claim's `volume.kubernetes.io/selected-node` to `node` for its class's provisioner.
 */
export interface Binding {
  readonly namespace: string
  readonly claim: string
  readonly claimUid: string
  readonly volume: string
  readonly node?: string
}

/** The claim annotation that tells a provisioner where to make its volume. */
export const selectedNodeAnnotation = "volume.kubernetes.io/selected-node"

const noProvisioner = "kubernetes.io/no-provisioner"
const localPathProvisioner = "fleet.koder.dev/local-path"
const localPathRoot = "storage.fleet.koder.dev/local-path-root"

const hasOwn = Object.prototype.hasOwnProperty
const meta = (o: JsonObject) => asObject(o["metadata"])
const isDeleting = (o: JsonObject) => meta(o)["deletionTimestamp"] !== undefined && meta(o)["deletionTimestamp"] !== null
const classAnnotation = "volume.beta.kubernetes.io/storage-class"
const classOf = (o: JsonObject): string => asString(asObject(o["spec"])["storageClassName"]) || asString(asObject(meta(o)["annotations"])[classAnnotation])

const storageNanos = (v: unknown): bigint | undefined => {
  if (typeof v !== "string" && typeof v !== "number") return undefined
  const q = Quantity.parse(String(v))
  return q._tag === "Right" ? q.right.nanos : undefined
}

/** A volume that may take a claim, parsed once per cycle. */
interface Candidate {
  readonly name: string
  readonly size: bigint
  /** Position in the lookup's list: the tie-break between equal sizes, as upstream's first match. */
  readonly index: number
  /** `spec.nodeAffinity.required`; undefined allows every node. */
  readonly required: Record<string, unknown> | undefined
}

/** An unbound claim waiting for this pod, with its candidate volumes. */
interface Delayed {
  readonly key: string
  readonly namespace: string
  readonly name: string
  readonly uid: string
  readonly size: bigint
  /** A volume whose claimRef already names this claim: the only one it may take. */
  readonly prebound: Candidate | undefined
  /** Candidates whose affinity cannot be indexed, by size. */
  readonly generic: ReadonlyArray<Candidate>
  /** Candidates by (label key → value → list by size), for affinities of one term with an `In` requirement. */
  readonly indexed: ReadonlyMap<string, ReadonlyMap<string, ReadonlyArray<Candidate>>>
  /** When no volume fits: whether its class can provision one on a node (undefined: it cannot anywhere). */
  readonly provision: ((node: NodeInfo) => boolean) | undefined
}

// What `choose` records for a claim its class will provision (its name is unique per claim).
const provisionCandidate = (key: string): Candidate => ({ name: `\u0000provision:${key}`, size: 0n, index: -1, required: undefined })
const isProvision = (c: Candidate) => c.name.startsWith("\u0000provision:")

interface PreFilterState {
  readonly snapshot: Snapshot
  /** Bound claims' volume affinity (`null`: the volume is missing; undefined: no affinity). */
  readonly bound: ReadonlyArray<Record<string, unknown> | undefined | null>
  readonly delayed: ReadonlyArray<Delayed>
  /** Scratch for choosing without allocating per node. */
  readonly chosen: Array<Candidate>
}

const stateKey = `PreFilter${name}`
const reservedKey = `Reserve${name}`

// The key that stands for `metadata.name` (matchFields) in the candidate index.
const nameField = "\u0000metadata.name"

const skip: Status = status("Skip")
const unboundImmediate: Status = status("UnschedulableAndUnresolvable", reasonUnboundImmediate)
const noState: Status = status("Error", `reading "${stateKey}" from cycleState: not found`)

// Every combination of Filter's reasons, in upstream's order, built once.
const filterVerdicts: ReadonlyArray<Status> = Array.from({ length: 8 }, (_, bits) =>
  status(
    "UnschedulableAndUnresolvable",
    ...[reasonNodeConflict, reasonBindConflict, reasonPVNotExist].filter((_, i) => (bits & (1 << i)) !== 0)
  )
)

/**
 * The index entries of a volume affinity: when it has one term, the values of that term's first
 * `In` requirement (on a label, or on `metadata.name`) — every node it allows has one of them.
 */
const indexEntries = (required: Record<string, unknown> | undefined): { readonly key: string; readonly values: ReadonlyArray<string> } | undefined => {
  if (required === undefined) return undefined
  const terms = asArray(required["nodeSelectorTerms"])
  if (terms.length !== 1) return undefined
  const term = asObject(terms[0])
  for (const [field, key] of [
    ["matchFields", nameField],
    ["matchExpressions", undefined]
  ] as const) {
    for (const r of asArray(term[field]).map(asObject)) {
      const values = asArray(r["values"]).map(asString)
      if (r["operator"] === "In" && values.length > 0) {
        if (key === undefined) return { key: asString(r["key"]), values }
        if (r["key"] === "metadata.name") return { key, values }
      }
    }
  }
  return undefined
}

const affinityOf = (pv: JsonObject): Record<string, unknown> | undefined => {
  const required = asObject(asObject(pv["spec"])["nodeAffinity"])["required"]
  return required === undefined || required === null ? undefined : asObject(required)
}

const allows = (c: Candidate, node: NodeInfo): boolean => c.required === undefined || matchesNodeSelectorTerms(c.required, node.node)

// Each claim has its own Candidate objects for a volume: compare by name.
const taken = (chosen: ReadonlyArray<Candidate>, c: Candidate): boolean => {
  for (let i = 0; i < chosen.length; i++) if (chosen[i]!.name === c.name) return true
  return false
}

const better = (c: Candidate, best: Candidate | undefined): boolean => best === undefined || c.size < best.size || (c.size === best.size && c.index < best.index)

/** The best not yet chosen volume in `list` (sorted by size) that allows `node`. */
const bestIn = (list: ReadonlyArray<Candidate>, node: NodeInfo, chosen: ReadonlyArray<Candidate>, best: Candidate | undefined): Candidate | undefined => {
  for (const c of list) {
    if (!better(c, best)) return best
    if (taken(chosen, c) || !allows(c, node)) continue
    return c
  }
  return best
}

/**
 * Picks a volume for every delayed claim on `node` into `s.chosen` (claims by size, each the
 * smallest volume left); false when some claim gets none.
 */
const choose = (s: PreFilterState, node: NodeInfo): boolean => {
  const chosen = s.chosen
  chosen.length = 0
  for (const d of s.delayed) {
    if (d.prebound !== undefined) {
      if (taken(chosen, d.prebound) || !allows(d.prebound, node)) return false
      chosen.push(d.prebound)
      continue
    }
    let best = bestIn(d.generic, node, chosen, undefined)
    for (const [key, byValue] of d.indexed) {
      const value = key === nameField ? node.name : hasOwn.call(node.labels, key) ? node.labels[key] : undefined
      const list = value === undefined ? undefined : byValue.get(value)
      if (list !== undefined) best = bestIn(list, node, chosen, best)
    }
    if (best === undefined) {
      if (d.provision === undefined || !d.provision(node)) return false
      best = provisionCandidate(d.key)
    }
    chosen.push(best)
  }
  return true
}

const accessModesFit = (claimModes: ReadonlyArray<string>, pvModes: ReadonlyArray<string>): boolean => claimModes.every((m) => pvModes.includes(m))

/** The plugin, as a profile builds it. */
export type VolumeBinding = PreFilterPlugin & FilterPlugin & ReservePlugin

const make = (lookup: VolumeLookup | undefined, waitForFirstConsumer: ReadonlySet<string>): VolumeBinding => {
  // Volumes reserved by pods whose binding has not landed yet: volume → claim key.
  const assumed = new Map<string, string>()

  const delaysBinding = (claim: JsonObject): boolean => {
    const cls = classOf(claim)
    if (cls === "") return true
    const sc = lookup?.storageClass?.(cls)
    if (sc !== undefined) return sc["volumeBindingMode"] === "WaitForFirstConsumer"
    return waitForFirstConsumer.has(cls)
  }

  /**
   * Whether a claim's class provisions volumes, and on which nodes: those its `allowedTopologies`
   * allow; for the local-path provisioner, nodes whose agent set a root for its directories.
   */
  const provisionerOf = (claim: JsonObject): ((node: NodeInfo) => boolean) | undefined => {
    const cls = classOf(claim)
    const sc = cls === "" ? undefined : lookup?.storageClass?.(cls)
    const provisioner = sc === undefined ? "" : asString(sc["provisioner"])
    if (provisioner === "" || provisioner === noProvisioner) return undefined
    const terms = asArray(sc!["allowedTopologies"]).map(asObject)
    return (node) => {
      if (provisioner === localPathProvisioner && asString(asObject(asObject(node.node["metadata"])["annotations"])[localPathRoot]) === "") return false
      if (terms.length === 0) return true
      return terms.some((t) =>
        asArray(t["matchLabelExpressions"]).map(asObject).every((e) => {
          const key = asString(e["key"])
          return hasOwn.call(node.labels, key) && asArray(e["values"]).map(asString).includes(node.labels[key]!)
        })
      )
    }
  }

  const candidatesFor = (claim: JsonObject, claimKey: string, volumes: ReadonlyArray<JsonObject>): Delayed => {
    const m = meta(claim)
    const spec = asObject(claim["spec"])
    const namespace = asString(m["namespace"])
    const claimName = asString(m["name"])
    const uid = asString(m["uid"])
    const size = storageNanos(asObject(asObject(spec["resources"])["requests"])["storage"]) ?? 0n
    const cls = classOf(claim)
    const modes = asArray(spec["accessModes"]).map(asString)
    const mode = asString(spec["volumeMode"]) || "Filesystem"
    const rawSelector = spec["selector"]
    const selector = rawSelector === undefined || rawSelector === null ? LabelSelector.everything : LabelSelector.compile(rawSelector as LabelSelector.LabelSelector)
    let prebound: Candidate | undefined
    const generic: Array<Candidate> = []
    const indexed = new Map<string, Map<string, Array<Candidate>>>()
    volumes.forEach((pv, index) => {
      if (isDeleting(pv)) return
      const pvSpec = asObject(pv["spec"])
      const ref = pvSpec["claimRef"]
      const pvName = asString(meta(pv)["name"])
      const candidate = (): Candidate => ({ name: pvName, size: storageNanos(asObject(pvSpec["capacity"])["storage"]) ?? 0n, index, required: affinityOf(pv) })
      if (ref !== undefined && ref !== null) {
        const r = asObject(ref)
        const mine = asString(r["namespace"]) === namespace && asString(r["name"]) === claimName && (asString(r["uid"]) === "" || asString(r["uid"]) === uid)
        if (mine && prebound === undefined) prebound = candidate()
        return
      }
      const phase = asString(asObject(pv["status"])["phase"])
      if (phase !== "Available" && phase !== "Pending" && phase !== "") return
      const holder = assumed.get(pvName)
      if (holder !== undefined && holder !== claimKey) return
      if (classOf(pv) !== cls || (asString(pvSpec["volumeMode"]) || "Filesystem") !== mode) return
      if (!selector(asObject(meta(pv)["labels"]) as Record<string, string>) || !accessModesFit(modes, asArray(pvSpec["accessModes"]).map(asString))) return
      const c = candidate()
      if (c.size < size) return
      const entries = indexEntries(c.required)
      if (entries === undefined) {
        generic.push(c)
        return
      }
      let byValue = indexed.get(entries.key)
      if (byValue === undefined) indexed.set(entries.key, (byValue = new Map()))
      for (const v of new Set(entries.values)) {
        const list = byValue.get(v)
        if (list === undefined) byValue.set(v, [c])
        else list.push(c)
      }
    })
    const bySize = (a: Candidate, b: Candidate) => (a.size < b.size ? -1 : a.size > b.size ? 1 : a.index - b.index)
    generic.sort(bySize)
    for (const byValue of indexed.values()) for (const list of byValue.values()) list.sort(bySize)
    return { key: claimKey, namespace, name: claimName, uid, size, prebound, generic, indexed, provision: prebound === undefined ? provisionerOf(claim) : undefined }
  }

  return {
    name,
    preFilter: (state, pod, snapshot) => {
      const spec = asObject(pod.pod["spec"])
      const names: Array<{ readonly claim: string; readonly ephemeral: boolean }> = []
      for (const v of asArray(spec["volumes"]).map(asObject)) {
        const pvc = asString(asObject(v["persistentVolumeClaim"])["claimName"])
        if (pvc !== "") names.push({ claim: pvc, ephemeral: false })
        else if (v["ephemeral"] !== undefined && v["ephemeral"] !== null) names.push({ claim: `${pod.name}-${asString(v["name"])}`, ephemeral: true })
      }
      // No claims, or no way to read them (no lookup wired): nothing to check.
      if (names.length === 0 || lookup === undefined) return { status: skip }
      const volumes = lookup.volumes()
      const byName = new Map<string, JsonObject>()
      for (const pv of volumes) byName.set(asString(meta(pv)["name"]), pv)
      // Volumes whose binding has landed (claimRef written) or that are gone need no holding.
      for (const pvName of [...assumed.keys()]) {
        const pv = byName.get(pvName)
        const ref = pv === undefined ? undefined : asObject(pv["spec"])["claimRef"]
        if (pv === undefined || (ref !== undefined && ref !== null)) assumed.delete(pvName)
      }
      const bound: Array<Record<string, unknown> | undefined | null> = []
      const delayed: Array<Delayed> = []
      let immediate = 0
      const seen = new Set<string>()
      for (const { claim: claimName, ephemeral } of names) {
        if (seen.has(claimName)) continue
        seen.add(claimName)
        const claim = lookup.claim(pod.namespace, claimName)
        if (claim === undefined) return { status: status("UnschedulableAndUnresolvable", `persistentvolumeclaim "${claimName}" not found`) }
        if (isDeleting(claim)) return { status: status("UnschedulableAndUnresolvable", `persistentvolumeclaim "${claimName}" is being deleted`) }
        if (ephemeral) {
          const owner = asArray(meta(claim)["ownerReferences"]).map(asObject).find((r) => r["controller"] === true)
          if (owner === undefined || asString(owner["uid"]) !== pod.uid) {
            return { status: status("UnschedulableAndUnresolvable", `PVC ${pod.namespace}/${claimName} was not created for pod ${pod.namespace}/${pod.name} (pod is not owner)`) }
          }
        }
        const volumeName = asString(asObject(claim["spec"])["volumeName"])
        if (volumeName !== "") {
          const pv = byName.get(volumeName)
          bound.push(pv === undefined ? null : affinityOf(pv))
        } else if (delaysBinding(claim)) {
          delayed.push(candidatesFor(claim, `${pod.namespace}/${claimName}`, volumes))
        } else {
          immediate++
        }
      }
      if (immediate > 0) return { status: unboundImmediate }
      // Larger claims choose after smaller ones, as upstream, so small volumes go to small claims.
      delayed.sort((a, b) => (a.size < b.size ? -1 : a.size > b.size ? 1 : 0))
      state.write(stateKey, { snapshot, bound, delayed, chosen: [] } satisfies PreFilterState)
      return { status: success }
    },

    filter: (state, _pod, node) => {
      const s = state.read<PreFilterState>(stateKey)
      if (s === undefined) return noState
      let bits = 0
      for (const required of s.bound) {
        if (required === null) bits |= 4
        else if (required !== undefined && !matchesNodeSelectorTerms(required, node.node)) bits |= 1
      }
      if (s.delayed.length > 0 && !choose(s, node)) bits |= 2
      return bits === 0 ? success : filterVerdicts[bits]!
    },

    reserve: (state, _pod, nodeName) => {
      const s = state.read<PreFilterState>(stateKey)
      if (s === undefined || s.delayed.length === 0) return success
      const node = s.snapshot.get(nodeName)
      if (node === undefined) return status("Error", `node "${nodeName}" not found`)
      // Another pod may have reserved a candidate since PreFilter: hide it and choose again.
      const free = s.delayed.map((d): Delayed => {
        const held = (c: Candidate) => {
          const holder = assumed.get(c.name)
          return holder !== undefined && holder !== d.key
        }
        const indexed = new Map([...d.indexed].map(([k, byValue]) => [k, new Map([...byValue].map(([v, list]) => [v, list.filter((c) => !held(c))]))]))
        return { ...d, prebound: d.prebound !== undefined && held(d.prebound) ? undefined : d.prebound, generic: d.generic.filter((c) => !held(c)), indexed }
      })
      const scratch: PreFilterState = { ...s, delayed: free, chosen: [] }
      if (!choose(scratch, node)) return status("Unschedulable", reasonBindConflict)
      const out: Array<Binding> = free.map((d, i) => {
        const c = scratch.chosen[i]!
        return isProvision(c) ? { namespace: d.namespace, claim: d.name, claimUid: d.uid, volume: "", node: nodeName } : { namespace: d.namespace, claim: d.name, claimUid: d.uid, volume: c.name }
      })
      for (let i = 0; i < out.length; i++) if (out[i]!.volume !== "") assumed.set(out[i]!.volume, free[i]!.key)
      state.write(reservedKey, out)
      return success
    },

    unreserve: (state) => {
      const out = state.read<ReadonlyArray<Binding>>(reservedKey)
      if (out === undefined) return
      for (const b of out) if (b.volume !== "" && assumed.get(b.volume) === `${b.namespace}/${b.claim}`) assumed.delete(b.volume)
      state.write(reservedKey, [])
    }
  }
}

/** The claim → volume bindings Reserve chose this cycle, for the runtime to write (pure). */
export const bindings = (state: CycleState): ReadonlyArray<Binding> => state.read<ReadonlyArray<Binding>>(reservedKey) ?? []

/**
 * Builds the plugin. Handle (or args): `volumes`, the VolumeLookup; args: `waitForFirstConsumer`
 * class names (used while the lookup knows no StorageClass).
 */
export const factory: Factory = (args, handle) => {
  const a = asObject(args)
  const wffc = a["waitForFirstConsumer"] ?? []
  if (!Array.isArray(wffc) || !wffc.every((c) => typeof c === "string")) return `waitForFirstConsumer: Invalid value: ${JSON.stringify(wffc)}: must be a list of StorageClass names`
  const fromArgs = typeof a["volumes"] === "object" && a["volumes"] !== null ? (a["volumes"] as VolumeLookup) : undefined
  return make((handle as VolumeHandle).volumes ?? fromArgs, new Set(wffc as ReadonlyArray<string>))
}
