/**
 * The core/v1 defaults other groups reuse (SetDefaults_PodSpec, SetDefaults_Container,
 * SetDefaults_PersistentVolumeClaim): pods inside workload templates and claim templates get the
 * same defaults as pods and claims created directly, as upstream's defaulters call each other.
 */
import { asObject, type JsonObject } from "../../object/Json.js"
import { objectAt, withDefault } from "./Rules.js"

const imagePullPolicy = (image: unknown) => {
  if (typeof image !== "string") return "IfNotPresent"
  const lastSlash = image.lastIndexOf("/")
  const tagged = image.slice(lastSlash + 1)
  if (image.includes("@")) return "IfNotPresent"
  const colon = tagged.lastIndexOf(":")
  return colon < 0 || tagged.slice(colon + 1) === "latest" ? "Always" : "IfNotPresent"
}

const defaultContainer = (c: unknown) => {
  let container = asObject(c)
  container = withDefault(container, "imagePullPolicy", imagePullPolicy(container["image"]))
  container = withDefault(container, "terminationMessagePath", "/dev/termination-log")
  container = withDefault(container, "terminationMessagePolicy", "File")
  if (Array.isArray(container["ports"])) {
    container = { ...container, ports: container["ports"].map((p) => withDefault(asObject(p), "protocol", "TCP")) }
  }
  return container
}

/** PodSpec defaults (also inside pod templates). */
export const defaultPodSpec = (spec: JsonObject): JsonObject => {
  let s = spec
  s = withDefault(s, "restartPolicy", "Always")
  s = withDefault(s, "terminationGracePeriodSeconds", 30)
  s = withDefault(s, "dnsPolicy", "ClusterFirst")
  s = withDefault(s, "schedulerName", "default-scheduler")
  s = withDefault(s, "securityContext", {})
  if (Array.isArray(s["containers"])) s = { ...s, containers: s["containers"].map(defaultContainer) }
  if (Array.isArray(s["initContainers"])) s = { ...s, initContainers: s["initContainers"].map(defaultContainer) }
  return s
}

/** A workload spec whose `template.spec` gets the PodSpec defaults. */
export const defaultTemplate = (spec: JsonObject): JsonObject => {
  const template = objectAt(spec["template"])
  const podSpec = objectAt(template?.["spec"])
  return template && podSpec ? { ...spec, template: { ...template, spec: defaultPodSpec(podSpec) } } : spec
}

/** A claim (or claim template) spec with the defaults SetDefaults_PersistentVolumeClaim gives it. */
export const defaultClaimSpec = (spec: JsonObject): JsonObject => withDefault(spec, "volumeMode", "Filesystem")
