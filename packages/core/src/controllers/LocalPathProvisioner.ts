/**
 * The built-in local-path provisioner (k3s's `local-path-provisioner`, in the controller manager):
 * a claim of a class whose provisioner is `fleet.koder.dev/local-path`, handed over by the
 * PersistentVolume controller and placed by the scheduler (`volume.kubernetes.io/selected-node`),
 * gets a PersistentVolume `pvc-<claim uid>`: a directory `<root>/pvc-<uid>_<namespace>_<name>`
 * on that node (the root is the node's `storage.fleet.koder.dev/local-path-root`, which its agent
 * sets), `hostPath` DirectoryOrCreate, node affinity to the node by name, pre-bound to the claim,
 * with the class's reclaim policy and the claim's size and access modes. The agent makes the
 * directory when a pod first mounts it and removes it when the volume is deleted (the volume's
 * `storage.fleet.koder.dev/local-path` finalizer waits for that).
 *
 * Refused, with a `ProvisioningFailed` Event: access modes other than ReadWriteOnce and
 * ReadWriteOncePod (a directory on one node), block volumes, a selector, a node without a root.
 */
import { Effect } from "effect"
import * as Storage from "../model/Storage.js"
import type { JsonObject } from "../object/Json.js"
import { annotationsOf, nameOf, namespaceOf, resourceVersionOf, uidOf } from "../object/Metadata.js"
import * as ResourceRefs from "../object/ResourceRefs.js"
import * as Views from "../object/Views.js"
import * as VolumeMatch from "../matching/VolumeMatch.js"
import type * as Controller from "./Controller.js"

/** The name of the volume provisioned for a claim. */
export const volumeNameFor = (claim: JsonObject): string => `pvc-${uidOf(claim)}`

/** The decision for one claim (pure): a volume to create, a refusal, or nothing to do. */
export type Decision =
  | { readonly _tag: "None" }
  | { readonly _tag: "Refuse"; readonly message: string }
  | { readonly _tag: "Create"; readonly volume: JsonObject }

const supportedModes = new Set(["ReadWriteOnce", "ReadWriteOncePod"])

/** What the decision reads: the claim's class and its selected node, when they exist. */
export const decide = (claim: JsonObject, storageClass: JsonObject | undefined, node: JsonObject | undefined, existing: JsonObject | undefined): Decision => {
  const c = Views.persistentVolumeClaim(claim)
  const a = annotationsOf(claim)
  if (c.metadata?.deletionTimestamp != null || (c.spec?.volumeName ?? "") !== "" || existing !== undefined) return { _tag: "None" }
  if (a[Storage.StorageProvisionerAnnotation] !== Storage.LocalPathProvisioner) return { _tag: "None" }
  const nodeName = a[Storage.SelectedNodeAnnotation]
  if (nodeName === undefined || storageClass === undefined) return { _tag: "None" }
  const sc = Views.storageClass(storageClass)
  if (sc.provisioner !== Storage.LocalPathProvisioner) return { _tag: "None" }
  const modes = c.spec?.accessModes ?? []
  if (modes.length === 0 || !modes.every((m) => supportedModes.has(m))) {
    return { _tag: "Refuse", message: `local-path volumes support only ReadWriteOnce and ReadWriteOncePod access modes, not ${modes.join(", ")}` }
  }
  if (c.spec?.volumeMode === "Block") return { _tag: "Refuse", message: "local-path volumes are directories: volumeMode Block is not supported" }
  if (c.spec?.selector != null) return { _tag: "Refuse", message: "claim Selector is not supported" }
  if (node === undefined) return { _tag: "Refuse", message: `node "${nodeName}" not found` }
  const root = annotationsOf(node)[Storage.LocalPathRootAnnotation]
  if (root === undefined || !root.startsWith("/")) {
    return { _tag: "Refuse", message: `node "${nodeName}" has no ${Storage.LocalPathRootAnnotation}: its agent does not make local-path volumes` }
  }
  const storage = c.spec?.resources?.requests?.["storage"]
  const name = volumeNameFor(claim)
  const volume: JsonObject = {
    apiVersion: "v1",
    kind: "PersistentVolume",
    metadata: {
      name,
      annotations: { [Storage.ProvisionedByAnnotation]: Storage.LocalPathProvisioner, [Storage.SelectedNodeAnnotation]: nodeName },
      finalizers: [Storage.LocalPathFinalizer]
    },
    spec: {
      capacity: { storage: String(storage ?? "0") },
      accessModes: [...modes],
      persistentVolumeReclaimPolicy: Storage.reclaimPolicyOf(sc as Pick<Storage.StorageClass, "reclaimPolicy">),
      storageClassName: VolumeMatch.classOf(claim),
      volumeMode: "Filesystem",
      hostPath: { path: `${root.replace(/\/+$/, "")}/${name}_${namespaceOf(claim)}_${nameOf(claim)}`, type: "DirectoryOrCreate" },
      nodeAffinity: { required: { nodeSelectorTerms: [{ matchFields: [{ key: "metadata.name", operator: "In", values: [nodeName] }] }] } },
      claimRef: { kind: "PersistentVolumeClaim", apiVersion: "v1", namespace: namespaceOf(claim), name: nameOf(claim), uid: uidOf(claim), resourceVersion: resourceVersionOf(claim) },
      ...(sc.mountOptions == null ? {} : { mountOptions: [...sc.mountOptions] })
    }
  }
  return { _tag: "Create", volume }
}

const claimsOn = (informers: Parameters<Controller.KeyMapper>[1], node: string) =>
  informers
    .for(ResourceRefs.PersistentVolumeClaim)
    .list()
    .filter((c) => annotationsOf(c)[Storage.SelectedNodeAnnotation] === node && (Views.persistentVolumeClaim(c).spec?.volumeName ?? "") === "")
    .map((c) => `${namespaceOf(c)}/${nameOf(c)}`)

/** The provisioner: one key per claim. */
export const reconciler = (): Controller.Reconciler => ({
  name: "local-path-provisioner",
  primary: ResourceRefs.PersistentVolumeClaim,
  watches: [
    // A node that gains its root can take the claims waiting on it.
    { ref: ResourceRefs.Node, keys: (c, informers) => claimsOn(informers, nameOf(c.object)) }
  ],
  reads: [ResourceRefs.StorageClass, ResourceRefs.PersistentVolume],
  reconcile: (key, ctx) =>
    Effect.gen(function* () {
      const namespace = key.slice(0, key.indexOf("/"))
      const claim = ctx.informers.for(ResourceRefs.PersistentVolumeClaim).get(namespace, key.slice(key.indexOf("/") + 1))
      if (claim === undefined) return
      const nodeName = annotationsOf(claim)[Storage.SelectedNodeAnnotation]
      const className = VolumeMatch.classOf(claim)
      const d = decide(
        claim,
        className === "" ? undefined : ctx.informers.for(ResourceRefs.StorageClass).get(undefined, className),
        nodeName === undefined ? undefined : ctx.informers.for(ResourceRefs.Node).get(undefined, nodeName),
        ctx.informers.for(ResourceRefs.PersistentVolume).get(undefined, volumeNameFor(claim))
      )
      if (d._tag === "None") return
      if (d._tag === "Refuse") {
        yield* ctx.events.record(claim, "Warning", "ProvisioningFailed", `failed to provision volume with StorageClass "${className}": ${d.message}`)
        return
      }
      yield* ctx.events.record(claim, "Normal", "Provisioning", `External provisioner is provisioning volume for claim "${namespace}/${nameOf(claim)}"`)
      const made = yield* ctx.client.create(d.volume).pipe(
        Effect.map(() => true),
        Effect.catchIf(
          (e) => e.status.code === 409,
          () => Effect.succeed(false)
        )
      )
      if (made) yield* ctx.events.record(claim, "Normal", "ProvisioningSucceeded", `Successfully provisioned volume ${nameOf(d.volume)}`)
    })
})
