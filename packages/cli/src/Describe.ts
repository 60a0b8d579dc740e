/**
 * `describe`'s text, kubectl-style and pure (now is an argument, so tests can pin ages): the
 * common metadata block, a section per kind for the kinds people describe most (Pod, Deployment,
 * ReplicaSet, Node, Service), a generic rendering of `spec` and `status` for every other kind,
 * then the object's Events as a table.
 */
import * as Age from "./Age.js"
import { arr, meta, obj, str } from "./Cli.js"
import * as Printers from "./Printers.js"

type Json = Record<string, unknown>

const pad = (label: string, width = 14) => {
  const l = `${label}:`
  return l.length >= width + 1 ? `${l}  ` : l.padEnd(width + 1)
}

const kv = (m: unknown, sep = "="): Array<string> => Object.entries(obj(m)).map(([k, v]) => `${k}${sep}${str(v)}`)

/** A multi-value field: the first value after the label, the rest aligned under it. */
const multi = (label: string, values: ReadonlyArray<string>, indent = "", width = 14): string => {
  if (values.length === 0) return `${indent}${pad(label, width)}<none>`
  return values.map((v, i) => (i === 0 ? `${indent}${pad(label, width)}${v}` : `${indent}${" ".repeat(width + 1)}${v}`)).join("\n")
}

const line = (label: string, value: unknown, indent = "", width = 14) => `${indent}${pad(label, width)}${value === undefined || value === null || value === "" ? "<none>" : str(value)}`

/** Generic rendering of any JSON value as kubectl's describer does for unknown kinds. */
const generic = (value: unknown, indent: string): Array<string> => {
  if (Array.isArray(value)) {
    return value.flatMap((item) => {
      if (typeof item !== "object" || item === null) return [`${indent}${str(item)}`]
      const lines = generic(item, `${indent}  `)
      return lines.length === 0 ? [] : [`${indent}- ${lines[0]!.trimStart()}`, ...lines.slice(1)]
    })
  }
  return Object.entries(obj(value)).flatMap(([k, v]) => {
    const label = k.charAt(0).toUpperCase() + k.slice(1)
    if (typeof v === "object" && v !== null) {
      if (Array.isArray(v) && v.every((x) => typeof x !== "object" || x === null)) return [`${indent}${label}:  ${v.map(str).join(", ")}`]
      return [`${indent}${label}:`, ...generic(v, `${indent}  `)]
    }
    return [`${indent}${label}:  ${str(v)}`]
  })
}

const header = (o: Json, now: number): Array<string> => {
  const m = meta(o)
  return [
    line("Name", m["name"]),
    ...(m["namespace"] !== undefined ? [line("Namespace", m["namespace"])] : []),
    multi("Labels", kv(m["labels"])),
    multi("Annotations", kv(m["annotations"], ": ").map((a) => (a.length > 120 ? `${a.slice(0, 117)}...` : a))),
    `CreationTimestamp:  ${m["creationTimestamp"] === undefined ? "<unset>" : `${str(m["creationTimestamp"])} (${Age.since(m["creationTimestamp"], now)} ago)`}`
  ]
}

const conditions = (status: Json): Array<string> => {
  const cs = arr(status["conditions"]).map(obj)
  if (cs.length === 0) return []
  return ["Conditions:", ...Printers.align([["  Type", "Status", "Reason"], ...cs.map((c) => [`  ${str(c["type"])}`, str(c["status"]), str(c["reason"]) || "<none>"])]).split("\n")]
}

const containerLines = (spec: Json, status: Json, indent: string): Array<string> => {
  const statuses = new Map(arr(status["containerStatuses"]).map((s) => [str(obj(s)["name"]), obj(s)]))
  return arr(spec["containers"]).flatMap((raw) => {
    const c = obj(raw)
    const s = statuses.get(str(c["name"]))
    const state = obj(s?.["state"])
    const stateName = Object.keys(state)[0]
    const detail = stateName === undefined ? {} : obj(state[stateName])
    const ports = arr(c["ports"]).map((p) => `${str(obj(p)["containerPort"])}/${str(obj(p)["protocol"] ?? "TCP")}`)
    const command = arr(c["command"]).map(str)
    const args = arr(c["args"]).map(str)
    const env = arr(c["env"]).map((e) => {
      const x = obj(e)
      if (x["value"] !== undefined) return `${str(x["name"])}:  ${str(x["value"])}`
      const ref = obj(obj(x["valueFrom"])["fieldRef"])
      return `${str(x["name"])}:   (${ref["fieldPath"] !== undefined ? `v1:${str(ref["fieldPath"])}` : "from a reference"})`
    })
    const requests = kv(obj(obj(c["resources"])["requests"]), ":  ")
    const limits = kv(obj(obj(c["resources"])["limits"]), ":  ")
    const short = (v: string) => (v.includes("\n") || v.length > 60 ? `${v.split("\n")[0]!.slice(0, 57)}...` : v)
    return [
      `${indent}${str(c["name"])}:`,
      line("Image", c["image"], `${indent}  `, 12),
      ...(ports.length > 0 ? [line("Port", ports.join(", "), `${indent}  `, 12)] : []),
      ...(command.length > 0 ? [multi("Command", command.map(short), `${indent}  `, 12)] : []),
      ...(args.length > 0 ? [multi("Args", args.map(short), `${indent}  `, 12)] : []),
      ...(s !== undefined
        ? [
            line("State", stateName === undefined ? "Waiting" : stateName.charAt(0).toUpperCase() + stateName.slice(1), `${indent}  `, 12),
            ...(detail["reason"] !== undefined ? [line("  Reason", detail["reason"], `${indent}  `, 12)] : []),
            ...(detail["exitCode"] !== undefined ? [line("  Exit Code", detail["exitCode"], `${indent}  `, 12)] : []),
            line("Ready", s["ready"] === true ? "True" : "False", `${indent}  `, 12),
            line("Restart Count", s["restartCount"] ?? 0, `${indent}  `, 12)
          ]
        : []),
      ...(limits.length > 0 ? [`${indent}  Limits:`, ...limits.map((l) => `${indent}    ${l}`)] : []),
      ...(requests.length > 0 ? [`${indent}  Requests:`, ...requests.map((l) => `${indent}    ${l}`)] : []),
      ...(env.length > 0 ? [`${indent}  Environment:`, ...env.map((e) => `${indent}    ${e}`)] : [])
    ]
  })
}

const pod = (o: Json): Array<string> => {
  const spec = obj(o["spec"])
  const status = obj(o["status"])
  const owner = arr(meta(o)["ownerReferences"]).map(obj).find((r) => r["controller"] === true)
  return [
    line("Node", spec["nodeName"]),
    line("Status", meta(o)["deletionTimestamp"] ? "Terminating" : status["phase"]),
    line("IP", status["podIP"]),
    ...(arr(status["hostPorts"]).length > 0 ? [line("Host Ports", arr(status["hostPorts"]).map((p) => `${str(obj(p)["name"] ?? obj(p)["containerPort"])}→${str(obj(p)["hostPort"])}`).join(", "))] : []),
    line("Controlled By", owner === undefined ? undefined : `${str(owner["kind"])}/${str(owner["name"])}`),
    "Containers:",
    ...containerLines(spec, status, "  "),
    ...conditions(status)
  ]
}

const deployment = (o: Json): Array<string> => {
  const spec = obj(o["spec"])
  const status = obj(o["status"])
  const strategy = obj(spec["strategy"])
  const ru = obj(strategy["rollingUpdate"])
  const template = obj(spec["template"])
  const n = (v: unknown) => Number(v ?? 0)
  return [
    line("Selector", kv(obj(spec["selector"])["matchLabels"]).join(",")),
    line(
      "Replicas",
      `${n(spec["replicas"])} desired | ${n(status["updatedReplicas"])} updated | ${n(status["replicas"])} total | ${n(status["availableReplicas"])} available | ${n(status["unavailableReplicas"])} unavailable`
    ),
    line("StrategyType", strategy["type"] ?? "RollingUpdate"),
    ...(str(strategy["type"] ?? "RollingUpdate") === "RollingUpdate" ? [line("RollingUpdateStrategy", `${str(ru["maxUnavailable"] ?? "25%")} max unavailable, ${str(ru["maxSurge"] ?? "25%")} max surge`)] : []),
    ...(spec["paused"] === true ? [line("Paused", "true")] : []),
    "Pod Template:",
    multi("  Labels", kv(meta(template)["labels"]), "", 14),
    "  Containers:",
    ...containerLines(obj(template["spec"]), {}, "   "),
    ...conditions(status)
  ]
}

const replicaSet = (o: Json): Array<string> => {
  const spec = obj(o["spec"])
  const status = obj(o["status"])
  const owner = arr(meta(o)["ownerReferences"]).map(obj).find((r) => r["controller"] === true)
  return [
    line("Selector", kv(obj(spec["selector"])["matchLabels"]).join(",")),
    line("Controlled By", owner === undefined ? undefined : `${str(owner["kind"])}/${str(owner["name"])}`),
    line("Replicas", `${Number(status["replicas"] ?? 0)} current / ${Number(spec["replicas"] ?? 0)} desired`),
    "Pod Template:",
    "  Containers:",
    ...containerLines(obj(obj(spec["template"])["spec"]), {}, "   "),
    ...conditions(status)
  ]
}

const node = (o: Json): Array<string> => {
  const spec = obj(o["spec"])
  const status = obj(o["status"])
  const taints = arr(spec["taints"]).map((t) => `${str(obj(t)["key"])}${obj(t)["value"] ? `=${str(obj(t)["value"])}` : ""}:${str(obj(t)["effect"])}`)
  return [
    multi("Taints", taints),
    line("Unschedulable", spec["unschedulable"] === true ? "true" : "false"),
    ...conditions(status),
    "Addresses:",
    ...arr(status["addresses"]).map((a) => `  ${str(obj(a)["type"])}:  ${str(obj(a)["address"])}`),
    "Capacity:",
    ...kv(status["capacity"], ":  ").map((c) => `  ${c}`),
    "Allocatable:",
    ...kv(status["allocatable"], ":  ").map((c) => `  ${c}`)
  ]
}

const service = (o: Json): Array<string> => {
  const spec = obj(o["spec"])
  return [
    line("Selector", kv(spec["selector"]).join(",")),
    line("Type", spec["type"] ?? "ClusterIP"),
    line("IP", spec["clusterIP"]),
    ...arr(spec["ports"]).flatMap((p) => {
      const x = obj(p)
      return [
        line("Port", `${str(x["name"]) || "<unset>"}  ${str(x["port"])}/${str(x["protocol"] ?? "TCP")}`),
        line("TargetPort", `${str(x["targetPort"] ?? x["port"])}/${str(x["protocol"] ?? "TCP")}`),
        ...(x["nodePort"] !== undefined ? [line("NodePort", `${str(x["name"]) || "<unset>"}  ${str(x["nodePort"])}/${str(x["protocol"] ?? "TCP")}`)] : [])
      ]
    })
  ]
}

const sections: Record<string, (o: Json) => Array<string>> = { Pod: pod, Deployment: deployment, ReplicaSet: replicaSet, Node: node, Service: service }

/** The Events block: oldest first, as kubectl prints it (pure). */
export const events = (list: ReadonlyArray<Json>, now: number): Array<string> => {
  if (list.length === 0) return ["Events:  <none>"]
  const time = (e: Json) => str(e["lastTimestamp"] ?? e["eventTime"] ?? e["firstTimestamp"] ?? meta(e)["creationTimestamp"])
  const sorted = [...list].sort((a, b) => Date.parse(time(a)) - Date.parse(time(b)))
  const rows = sorted.map((e) => {
    const count = Number(e["count"] ?? 1)
    const age = Age.since(time(e), now)
    const from = str(obj(e["source"])["component"] ?? e["reportingComponent"] ?? e["reportingController"])
    return [`  ${str(e["type"])}`, str(e["reason"]), count > 1 ? `${age} (x${count} over ${Age.since(e["firstTimestamp"], now)})` : age, from, str(e["message"]).trim()]
  })
  return ["Events:", ...Printers.align([["  Type", "Reason", "Age", "From", "Message"], ["  ----", "------", "----", "----", "-------"], ...rows]).split("\n")]
}

/** The whole description of `o` with its events (pure). */
export const describe = (o: Json, eventList: ReadonlyArray<Json>, now: number): string => {
  const kind = str(o["kind"])
  const specific = sections[kind]
  const body = specific
    ? specific(o)
    : [
        ...(o["spec"] !== undefined ? ["Spec:", ...generic(o["spec"], "  ")] : []),
        ...(o["status"] !== undefined ? ["Status:", ...generic(o["status"], "  ")] : []),
        ...Object.entries(o)
          .filter(([k]) => !["apiVersion", "kind", "metadata", "spec", "status"].includes(k))
          .flatMap(([k, v]) => generic({ [k]: v }, ""))
      ]
  return `${[...header(o, now), ...body, ...events(eventList, now)].join("\n")}\n`
}
