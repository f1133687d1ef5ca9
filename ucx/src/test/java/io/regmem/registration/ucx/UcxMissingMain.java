package io.regmem.registration.ucx;

import io.regmem.core.RdmaException;
import io.regmem.registration.RdmaDevice;

/**
 * For {@link UcxProviderTest}: a JVM whose UCX cannot be found ({@code -Dregmem.ucx.libdir} names an
 * empty directory) opens "ucx" twice and then "soft", and prints what happened.
 */
public final class UcxMissingMain {
    private UcxMissingMain() {
    }

    public static void main(String[] args) {
        for (int i = 0; i < 2; i++) {
            try (RdmaDevice d = RdmaDevice.open("ucx")) {
                System.out.println("OPENED " + d.name());
            } catch (RdmaException e) {
                System.out.println("REFUSED " + e.errno() + " " + e.getMessage());
            }
        }
        try (RdmaDevice d = RdmaDevice.open("soft")) {
            System.out.println("SOFT " + d.name());
        }
    }
}
