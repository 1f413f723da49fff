package org.idempotency

import kotlinx.serialization.json.Json
import kotlinx.serialization.json.JsonArray
import kotlinx.serialization.json.JsonElement
import kotlinx.serialization.json.JsonNull
import kotlinx.serialization.json.JsonPrimitive
import java.io.File

/** The known-answer files of test/kat, read from the repository (never copied). */
object Kat {
    /** The repository's root: the nearest directory above this one holding test/kat/keys.csv. */
    val root: File by lazy {
        generateSequence(File(System.getProperty("user.dir")).absoluteFile) { it.parentFile }
            .firstOrNull { File(it, "test/kat/keys.csv").isFile }
            ?: error("test/kat/keys.csv not found above ${System.getProperty("user.dir")}")
    }

    /** The rows of test/kat/[name] as maps from the header's names. */
    fun rows(name: String): List<Map<String, String>> {
        val records = csv(File(root, "test/kat/$name").readText(Charsets.UTF_8))
        val header = records.first()
        return records.drop(1).filter { it.size == header.size }.map { header.zip(it).toMap() }
    }

    /** RFC 4180 records: quoted fields may hold commas, quotes ("") and line breaks. */
    fun csv(text: String): List<List<String>> {
        val records = mutableListOf<List<String>>()
        var fields = mutableListOf<String>()
        val field = StringBuilder()
        var quoted = false
        var i = 0
        while (i < text.length) {
            val c = text[i]
            if (quoted) {
                if (c == '"') {
                    if (i + 1 < text.length && text[i + 1] == '"') { field.append('"'); i++ } else quoted = false
                } else field.append(c)
            } else when (c) {
                '"' -> quoted = true
                ',' -> { fields.add(field.toString()); field.clear() }
                '\n' -> { fields.add(field.toString()); field.clear(); records.add(fields); fields = mutableListOf() }
                '\r' -> {}
                else -> field.append(c)
            }
            i++
        }
        if (field.isNotEmpty() || fields.isNotEmpty()) { fields.add(field.toString()); records.add(fields) }
        return records
    }

    /** A field holding JSON (the input and key columns). */
    fun json(text: String): JsonElement = Json.parseToJsonElement(text)

    /** A JSON string field as a Kotlin string, JSON null as null. */
    fun string(text: String): String? = when (val e = json(text)) {
        is JsonNull -> null
        is JsonPrimitive -> e.content
        else -> error("not a JSON string: $text")
    }

    /** A JSON array of strings (and nulls) as a list. */
    fun strings(text: String): List<String?> = (json(text) as JsonArray).map { if (it is JsonNull) null else (it as JsonPrimitive).content }
}
