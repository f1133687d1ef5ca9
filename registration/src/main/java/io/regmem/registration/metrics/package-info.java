/**
 * regmem's figures for standard dashboards: JMX beans under the domain {@code io.regmem} for every
 * open pool, device and registration cache ({@link io.regmem.registration.metrics.RegmemMBeans}),
 * and a Micrometer {@code MeterBinder} for the same figures
 * ({@link io.regmem.registration.metrics.RegmemMeterBinder}; Micrometer is an optional dependency).
 * See docs/observability.md.
 */
package io.regmem.registration.metrics;
