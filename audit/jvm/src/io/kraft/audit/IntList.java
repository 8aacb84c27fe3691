package io.kraft.audit;

import java.util.Arrays;

/** A growable int array: broker id lists without boxing. */
final class IntList {
    private int[] values = new int[4];
    private int size;

    void add(int value) {
        if (size == values.length) {
            values = Arrays.copyOf(values, size * 2);
        }
        values[size++] = value;
    }

    int[] toArray() {
        return Arrays.copyOf(values, size);
    }
}
