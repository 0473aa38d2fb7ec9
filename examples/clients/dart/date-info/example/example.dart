import 'dart:io';

import 'package:tollgate_date_info/tollgate_date_info.dart';

Future<void> main() async {
  final client = DateInfoClient(Platform.environment['TOLLGATE_API_KEY']!);
  try {
    final response = await client.execute(DateInfoParams(date: '2024-02-29'));
    print(response.data);
    print('credits left: ${response.credits?.remaining}');
  } finally {
    client.close();
  }
}
