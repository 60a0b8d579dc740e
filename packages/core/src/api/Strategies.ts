/**
 * The strategies of the built-in kinds, assembled from one module per API group under
 * `strategies/` as kube-apiserver's `pkg/registry/<group>`: the defaults each kind gets, which
 * subresources it has, which fields an update may not change, and the columns `kubectl get` shows.
 */
import type { GroupStrategies, PrinterColumn, ScaleSpec, Strategy } from "./Strategy.js"
import * as Apiextensions from "./strategies/ApiextensionsStrategies.js"
import * as Apps from "./strategies/AppsStrategies.js"
import * as Autoscaling from "./strategies/AutoscalingStrategies.js"
import * as Batch from "./strategies/BatchStrategies.js"
import * as Coordination from "./strategies/CoordinationStrategies.js"
import * as Core from "./strategies/CoreStrategies.js"
import * as Discovery from "./strategies/DiscoveryStrategies.js"
import * as Federation from "./strategies/FederationStrategies.js"
import * as Fleet from "./strategies/FleetStrategies.js"
import * as Networking from "./strategies/NetworkingStrategies.js"
import * as Policy from "./strategies/PolicyStrategies.js"
import * as Rbac from "./strategies/RbacStrategies.js"
import * as Scheduling from "./strategies/SchedulingStrategies.js"
import * as Storage from "./strategies/StorageStrategies.js"
import { age } from "./strategies/Printing.js"
import { neutral as neutralStrategy } from "./strategies/Rules.js"

const groups: ReadonlyArray<GroupStrategies> = [
  Core.group,
  Apps.group,
  Batch.group,
  Autoscaling.group,
  Networking.group,
  Discovery.group,
  Policy.group,
  Rbac.group,
  Scheduling.group,
  Storage.group,
  Coordination.group,
  Apiextensions.group,
  Fleet.group,
  Federation.group
]

// Every table is read by key only, so the order of groups changes no output.
const strategies: Readonly<Record<string, Strategy>> = Object.assign({}, ...groups.map((g) => g.strategies))
const columns: Readonly<Record<string, ReadonlyArray<PrinterColumn>>> = Object.assign({}, ...groups.map((g) => g.columns))
const scale: Readonly<Record<string, ScaleSpec>> = Object.assign({}, ...groups.map((g) => g.scale))
const withStatus = new Set(groups.flatMap((g) => g.withStatus))
const inAll = new Set(groups.flatMap((g) => g.inAll))

/** The strategy of a built-in kind (a neutral one for kinds without special rules). */
export const forKind = (apiVersion: string, kind: string): Strategy => strategies[`${apiVersion}/${kind}`] ?? neutralStrategy

/** The neutral strategy (custom resources start from it). */
export const neutral: Strategy = neutralStrategy

/** The subresources a built-in kind has. */
export const subresources = (kind: string) => ({ status: withStatus.has(kind), scale: scale[kind] })

/** Discovery categories (`kubectl get all`). */
export const categories = (kind: string): ReadonlyArray<string> => (inAll.has(kind) ? ["all"] : [])

/** The Table columns of a built-in kind (after Name, which every table has). */
export const printerColumns = (kind: string): ReadonlyArray<PrinterColumn> => columns[kind] ?? [age]
