// ctest-labels: unit
/* The devices through qhx.h: qhx_devices_list (every device of the build on this machine, "cpu"
 * first, each with a description and its memory, names unique and each one a name the library
 * selects that very device by), qhx_device_name_valid (the spellings of the registry and nothing
 * else) and qhx_devices_choices (every kind of the build). With OpenCL on the machine, each
 * "opencl:N" listed is the device "opencl:N" creates. */
#include "devices/device.h"
#include "qhx.h"
#include "t.h"

#include <stdlib.h>
#include <string.h>

static void test_list(void) {
    qhx_device_item *items = NULL;
    size_t n = 0;
    qhx_error err = {0};
    CHECK_EQ(qhx_devices_list(&items, &n, &err), QHX_OK);
    CHECK(n >= 1);
    if (!items || n < 1) return;
    CHECK_STR(items[0].name, "cpu");
    CHECK_EQ(items[0].available, 1);
    CHECK(items[0].memory_bytes > 0); /* the physical memory */
    CHECK(items[0].memory_free_bytes <= items[0].memory_bytes);
    for (size_t i = 0; i < n; i++) {
        const qhx_device_item *it = &items[i];
        CHECK(it->description[0] != 0);
        CHECK(strchr(it->description, '\n') == NULL);
        CHECK(qhx_device_name_valid(it->name));
        CHECK(it->available == 0 || it->available == 1);
        if (it->memory_bytes) CHECK(it->memory_free_bytes <= it->memory_bytes);
        for (size_t j = 0; j < i; j++) CHECK(strcmp(items[j].name, it->name) != 0);
        if (!it->available || !strcmp(it->name, "cpu")) continue;
        /* the listed name selects that device: its create's label is "NAME (DEVICE NAME)" and
           the description starts with the device's name */
        const qhx_device_desc *dd = qhx_device_find(it->name);
        CHECK(dd != NULL);
        if (!dd) continue;
        qhx_device *d = NULL;
        if (dd->create(&(qhx_device_params){.spec = it->name}, &d, &err) != QHX_OK) {
            fprintf(stderr, "%s: %s\n", it->name, err.msg);
            CHECK(0);
            continue;
        }
        qhx_device_info info;
        d->op->info(d, &info);
        char want[64];
        snprintf(want, sizeof want, "%s (", it->name);
        CHECK(!strncmp(info.isa, want, strlen(want)));
        const char *dev_name = info.isa + strlen(want);
        CHECK(!strncmp(it->description, dev_name, strcspn(dev_name, ")")));
        d->op->destroy(d);
    }
    /* every kind of the build appears: its devices, or one item saying why there is none */
    for (int k = 0; k < qhx_device_count(); k++) {
        const char *kind = qhx_device_at(k)->name;
        int seen = 0;
        for (size_t i = 0; i < n; i++)
            seen |= !strncmp(items[i].name, kind, strlen(kind)) &&
                    (items[i].name[strlen(kind)] == 0 || items[i].name[strlen(kind)] == ':');
        CHECK(seen);
    }
    qhx_devices_free(items);
    qhx_devices_free(NULL);
    CHECK_EQ(qhx_devices_list(NULL, &n, &err), QHX_E_ARG);
    CHECK_EQ(qhx_devices_list(&items, NULL, &err), QHX_E_ARG);
}

static void test_names(void) {
    CHECK(qhx_device_name_valid("cpu"));
    static const char *const bad[] = {"", "CPU", "cpux", " cpu", "cpu ", "cpu:0", "cpu:", "gpu", "opencl:", "opencl:x",
                                      "opencl:-1", "opencl:1000", "opencl:1a", "opencl0", "opencl::1", ":0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (qhx_device_name_valid(bad[i])) fprintf(stderr, "'%s' accepted\n", bad[i]);
        CHECK(!qhx_device_name_valid(bad[i]));
    }
    CHECK(!qhx_device_name_valid(NULL));
    const int ocl = qhx_device_find("opencl") != NULL; /* a kind of this build */
    CHECK_EQ(qhx_device_name_valid("opencl"), ocl);
    CHECK_EQ(qhx_device_name_valid("opencl:0"), ocl);
    CHECK_EQ(qhx_device_name_valid("opencl:999"), ocl);
    const char *choices = qhx_devices_choices();
    CHECK(!strncmp(choices, "cpu", 3));
    for (int k = 0; k < qhx_device_count(); k++) CHECK_CONTAINS(choices, qhx_device_at(k)->name);
    if (ocl) CHECK_CONTAINS(choices, "opencl:N");
    CHECK(qhx_devices_choices() == choices); /* static */
}

int main(void) {
    test_names();
    test_list();
    return t_done("test_devices_api");
}
