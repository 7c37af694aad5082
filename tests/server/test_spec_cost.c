/*
 * The draft-length rule's costs (server/spec.c): what a drafted token adds
 * to a step is fitted from timed steps; a fit that noise drives to 0 or below
 * must read as "not known" (0: the scheduler then uses a prompt token's cost),
 * never as a tiny positive cost that makes every draft look free. And the
 * rule itself: rows that keep missing stop drafting where a draft costs a
 * quarter of a row, rows that keep hitting draft the most allowed.
 */
#include "check.h"
#include "server_internal.h"

#include <string.h>

static void noisy_fit(void)
{
    srv_spec_cost c;
    memset(&c, 0, sizeof c);
    srv_spec_cost_plain(&c, 4, 4e-3); /* 1 ms a row */
    /* steps with drafts that ran faster than plain ones: the machine's noise */
    for (int i = 0; i < 5; i++)
        srv_spec_cost_observe(&c, 4, 2, 3.9e-3);
    CHECK(srv_spec_cost_per_token(&c, 4) == 0.0,
          "a fit below 0 reads as a cost of %g s, not as unknown", srv_spec_cost_per_token(&c, 4));
    for (int i = 0; i < 40; i++)
        srv_spec_cost_observe(&c, 4, 2, 4.5e-3); /* 0.25 ms a draft */
    double per = srv_spec_cost_per_token(&c, 4);
    CHECK(per > 0.2e-3 && per < 0.3e-3, "the fit gives %g s a draft, not ~0.25 ms", per);
    CHECK(srv_spec_cost_per_token(&c, 16) == 0.0, "another batch size's cost is not known yet");
}

static void rule(void)
{
    srv_spec_row miss, hit;
    srv_spec_row_init(&miss, 8);
    srv_spec_row_init(&hit, 8);
    for (int i = 0; i < 6; i++) {
        int k = srv_spec_length(&miss, 8, 1e-3, 0.25e-3);
        srv_spec_row_update(&miss, k, 0, 8);
        k = srv_spec_length(&hit, 8, 1e-3, 0.25e-3);
        srv_spec_row_update(&hit, k, k, 8);
    }
    CHECK(srv_spec_length(&miss, 8, 1e-3, 0.25e-3) == 0, "a row that keeps missing still drafts");
    CHECK(srv_spec_length(&hit, 8, 1e-3, 0.25e-3) == 8,
          "a row that keeps hitting drafts less than 8");
}

int main(void)
{
    noisy_fit();
    rule();
    if (failures)
        return 1;
    printf("server.spec_cost: OK\n");
    return 0;
}
