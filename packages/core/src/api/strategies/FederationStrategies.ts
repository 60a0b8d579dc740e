/**
 * The hub's groups: `federation.fleet.koder.dev` (MemberCluster, Work) and `certificates.k8s.io`
 * (CertificateSigningRequest, for members' certificates): rules and columns.
 */
import * as Certificates from "../../model/Certificates.js"
import * as Federation from "../../model/Federation.js"
import { asArray, asObject, asString, type JsonObject } from "../../object/Json.js"
import type { GroupStrategies } from "../Strategy.js"
import { age } from "./Printing.js"
import { neutral, typed, typedUpdate } from "./Rules.js"

const condition = (o: JsonObject, type: string): string =>
  asString(
    asArray(asObject(o["status"])["conditions"])
      .map(asObject)
      .find((c) => c["type"] === type)?.["status"]
  ) || "Unknown"

const resource = (o: JsonObject, name: string): string => {
  const r = asObject(asObject(o["status"])["resources"])
  const allocated = asString(asObject(r["allocated"])[name])
  const allocatable = asString(asObject(r["allocatable"])[name])
  return allocatable === "" ? "" : `${allocated === "" ? "0" : allocated}/${allocatable}`
}

/** The federation group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies: {
    [`${Federation.ApiVersion}/MemberCluster`]: {
      ...neutral,
      prepareForCreate: (o) => ({ ...o, status: {} }),
      validate: typed(Federation.MemberCluster, Federation.validateMemberCluster),
      validateUpdate: typedUpdate(Federation.MemberCluster, Federation.validateMemberClusterUpdate),
      tracksGeneration: true
    },
    "certificates.k8s.io/v1/CertificateSigningRequest": {
      ...neutral,
      prepareForCreate: (o) => ({ ...o, status: {} }),
      validate: typed(Certificates.CertificateSigningRequest, Certificates.validate),
      validateUpdate: typedUpdate(Certificates.CertificateSigningRequest, Certificates.validateUpdate)
    },
    [`${Federation.ApiVersion}/Work`]: {
      ...neutral,
      prepareForCreate: (o) => ({ ...o, status: {} }),
      validate: typed(Federation.Work, Federation.validateWork),
      validateUpdate: typedUpdate(Federation.Work, (w) => Federation.validateWork(w)),
      tracksGeneration: true
    }
  },
  columns: {
    // kubectl's columns for CSRs.
    CertificateSigningRequest: [
      age,
      { name: "SignerName", type: "string", value: ".spec.signerName" },
      { name: "Requestor", type: "string", value: ".spec.username" },
      { name: "RequestedDuration", type: "string", value: (o) => { const s = asObject(o["spec"])["expirationSeconds"]; return typeof s === "number" ? `${Math.round(s / 60)}m` : "<none>" } },
      { name: "Condition", type: "string", value: (o) => { const d = Certificates.decisionOf(o as never); const issued = asString(asObject(o["status"])["certificate"]) !== ""; return d === undefined ? "Pending" : d === "Approved" && issued ? "Approved,Issued" : d } }
    ],
    MemberCluster: [
      { name: "Ready", type: "string", value: (o) => condition(o, "Ready") },
      { name: "Mode", type: "string", value: ".spec.syncMode" },
      { name: "Region", type: "string", value: ".spec.region" },
      { name: "Nodes", type: "integer", value: ".status.nodeCount" },
      { name: "CPU", type: "string", value: (o) => resource(o, "cpu") },
      { name: "Memory", type: "string", value: (o) => resource(o, "memory") },
      { name: "Version", type: "string", value: ".status.fleetVersion", priority: 1 },
      age
    ],
    Work: [
      { name: "Applied", type: "string", value: (o) => condition(o, "Applied") },
      { name: "Available", type: "string", value: (o) => condition(o, "Available") },
      { name: "Manifests", type: "integer", value: (o) => asArray(asObject(asObject(o["spec"])["workload"])["manifests"]).length },
      age
    ]
  },
  withStatus: ["MemberCluster", "Work", "CertificateSigningRequest"],
  scale: {},
  inAll: []
}
