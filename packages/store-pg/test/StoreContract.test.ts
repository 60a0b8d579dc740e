// The shared Store contract, run against PostgreSQL with a fresh schema per test.
import { StoreContract } from "@koder/fleet-core/testing"
import { freshLayer } from "./pgTest.js"

StoreContract.suite("postgres", freshLayer())
